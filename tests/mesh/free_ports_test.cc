// The test helper tests/mesh/free_ports.h: ports below the kernel's ephemeral range, bindable
// when handed out, and never the same port twice in one process (a cluster's API port and its
// node 0's mesh port, both on 127.0.0.1, once came out equal).
#include "tests/mesh/free_ports.h"

#include <gtest/gtest.h>

#include <set>

namespace tpnode::mesh::test {
namespace {

TEST(FreePortsTest, NoPortIsHandedOutTwiceInAProcess) {
  // 2000 draws from the ~22000 ports below the range would repeat one almost surely without
  // the process-wide record.
  std::set<uint16_t> seen;
  const int low = ephemeralPortLow();
  for (int i = 0; i < 2000; ++i) {
    const uint16_t port = freePort(i % 2 == 0 ? "127.0.0.1" : "127.0.0.2");
    EXPECT_TRUE(seen.insert(port).second) << "port " << port << " handed out twice";
    EXPECT_LT(port, low);
  }
}

TEST(FreePortsTest, LoopbackPeersGiveEachNodeItsOwnAddress) {
  const std::string peers = loopbackPeers(3);
  EXPECT_EQ(peers.rfind("127.0.0.1:", 0), 0u) << peers;
  EXPECT_NE(peers.find(",127.0.0.2:"), std::string::npos) << peers;
  EXPECT_NE(peers.find(",127.0.0.3:"), std::string::npos) << peers;
}

}  // namespace
}  // namespace tpnode::mesh::test
