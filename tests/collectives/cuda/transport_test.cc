// parseTransport / transportName: names round-trip, unknown values are refused with the flag.
#include <gtest/gtest.h>

#include "collectives/cuda/device_comm.h"
#include "common/error.h"

namespace tpnode::collectives::cuda {
namespace {

TEST(DeviceTransportTest, NamesRoundTrip) {
  for (Transport t : {Transport::kAuto, Transport::kNccl, Transport::kP2p, Transport::kHost}) {
    EXPECT_EQ(parseTransport(transportName(t), "--local-transport"), t);
  }
  EXPECT_EQ(transportName(Transport::kNccl), "nccl");
  EXPECT_EQ(transportName(Transport::kP2p), "p2p");
  EXPECT_EQ(transportName(Transport::kHost), "host");
  EXPECT_EQ(transportName(Transport::kAuto), "auto");
}

TEST(DeviceTransportTest, UnknownValueNamesFlagAndValue) {
  for (const char* bad : {"", "NCCL", "p2p ", "tcp", "hosts"}) {
    try {
      parseTransport(bad, "--local-transport");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("--local-transport"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace tpnode::collectives::cuda
