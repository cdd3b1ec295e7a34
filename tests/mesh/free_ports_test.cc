// The test helper tests/mesh/free_ports.h: ports below the kernel's ephemeral range, bindable
// when handed out, never the same port twice in one process (a cluster's API port and its node
// 0's mesh port, both on 127.0.0.1, once came out equal), and none another live process holds.
#include "tests/mesh/free_ports.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <set>

namespace tpnode::mesh::test {
namespace {

TEST(FreePortsTest, NoPortIsHandedOutTwiceInAProcess) {
  // 700 draws from the ~22000 ports below the range would repeat one (all but surely: the chance
  // of none is about 2e-5) without the reservations; each holds a descriptor, well under 1024.
  std::set<uint16_t> seen;
  const int low = ephemeralPortLow();
  for (int i = 0; i < 700; ++i) {
    const uint16_t port = freePort(i % 2 == 0 ? "127.0.0.1" : "127.0.0.2");
    EXPECT_TRUE(seen.insert(port).second) << "port " << port << " handed out twice";
    EXPECT_LT(port, low);
  }
}

TEST(FreePortsTest, APortHandedOutIsReservedAgainstOtherProcesses) {
  const uint16_t port = freePort();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // another test process: its reservation of the port must fail
    ::_exit(reservePort(port) ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "another process could reserve port " << port;
  EXPECT_FALSE(reservePort(port)) << "held already, by this process";
}

TEST(FreePortsTest, LoopbackPeersGiveEachNodeItsOwnAddress) {
  const std::string peers = loopbackPeers(3);
  EXPECT_EQ(peers.rfind("127.0.0.1:", 0), 0u) << peers;
  EXPECT_NE(peers.find(",127.0.0.2:"), std::string::npos) << peers;
  EXPECT_NE(peers.find(",127.0.0.3:"), std::string::npos) << peers;
}

}  // namespace
}  // namespace tpnode::mesh::test
