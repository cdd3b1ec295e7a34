// parseTransport / transportName: names round-trip, unknown values are refused with the flag.
#include <gtest/gtest.h>

#include "collectives/cuda/device_comm.h"
#include "collectives/cuda/host_staging_op.h"
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

// The host staging's chunk cut: whole below the threshold, otherwise at most kMaxChunks chunks
// of at least 1 MiB, 16-element aligned, covering the message.
TEST(DeviceTransportTest, HostChunksCoverTheMessage) {
  const size_t threshold = HostStagingOp::kHostChunkThreshold / sizeof(float);
  for (size_t count : {size_t{1}, size_t{1000}, threshold, threshold + 1, size_t{1} << 20,
                       (size_t{1} << 22) + 7, size_t{100000003}}) {
    const size_t chunk = HostStagingOp::chunkElements(count);
    if (count <= threshold) {
      EXPECT_EQ(chunk, count);
      continue;
    }
    EXPECT_EQ(chunk % 16, 0u) << count;
    EXPECT_GE(chunk * sizeof(float), size_t{1} << 20) << count;
    const size_t chunks = (count + chunk - 1) / chunk;
    EXPECT_LE(chunks, HostStagingOp::kMaxChunks) << count;
    EXPECT_GE(chunks, 2u) << count;
  }
}

}  // namespace
}  // namespace tpnode::collectives::cuda
