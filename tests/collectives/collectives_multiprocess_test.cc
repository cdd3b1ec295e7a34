// The collectives as real processes (tests/collectives/coll_node_main.cc) over the real TCP
// mesh on loopback: exact results for nodes x local ranks, and a node killed mid all-reduce.
#include <gtest/gtest.h>

#include <random>

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <memory>

#include "tests/mesh/free_ports.h"
#include "tests/mesh/process.h"

namespace tpnode::collectives {
namespace {

using mesh::test::Process;
using namespace std::chrono_literals;

// Process starts the binary named by TPNODE_BIN; point it at the driver.
std::vector<std::unique_ptr<Process>> start(int nodes, const std::vector<std::string>& args,
                                            const std::string& name) {
  ::setenv("TPNODE_BIN", TPNODE_COLL_NODE_BIN, 1);
  const std::string peers = mesh::test::loopbackPeers(nodes);
  // A fresh 32-byte cluster secret (64 hex digits) for this cluster.
  const std::string secret = "TPNODE_CLUSTER_SECRET=" + mesh::test::randomSecretHex();
  std::vector<std::unique_ptr<Process>> procs;
  for (int n = 0; n < nodes; ++n) {
    std::vector<std::string> a = {"--node-id", std::to_string(n), "--peers", peers};
    a.insert(a.end(), args.begin(), args.end());
    procs.push_back(std::make_unique<Process>(
        a, std::vector<std::string>{secret},
        ::testing::TempDir() + "/" + name + "_node" + std::to_string(n) + ".log"));
  }
  return procs;
}

struct Layout {
  int nodes, tp;
  const char* algo;
  const char* hier;
  const char* dtype;
  const char* counts;
};

class MultiprocessAllReduceTest : public ::testing::TestWithParam<Layout> {};

TEST_P(MultiprocessAllReduceTest, ExactOnEveryRank) {
  const Layout l = GetParam();
  auto procs = start(l.nodes,
                     {"--tp", std::to_string(l.tp), "--algo", l.algo, "--hier", l.hier, "--dtype",
                      l.dtype, "--counts", l.counts, "--rounds", "2"},
                     "allreduce");
  for (auto& p : procs) {
    EXPECT_EQ(p->wait(90s), 0) << p->log();
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, MultiprocessAllReduceTest,
                         ::testing::Values(Layout{2, 1, "direct", "sliced", "f32",
                                                  "1,7,1000,65537"},
                                           Layout{2, 2, "ring", "sliced", "bf16", "1,7,1000,65537"},
                                           Layout{3, 2, "ring", "sliced", "f32", "3,4099,1048583"},
                                           Layout{3, 4, "direct", "leader", "f16", "1,33,4099"},
                                           Layout{4, 1, "ring", "sliced", "f16", "5,100003"},
                                           Layout{4, 2, "direct", "sliced", "f32", "2,4099"},
                                           Layout{4, 2, "tree", "sliced", "f32", "2,4099,65537"},
                                           Layout{3, 1, "tree", "leader", "bf16", "1,33,4099"},
                                           Layout{4, 1, "auto", "auto", "f16", "7,4099,600011"},
                                           Layout{2, 1, "ring", "sliced", "f32", "16777216"}),
                         [](const ::testing::TestParamInfo<Layout>& p) {
                           return std::to_string(p.param.nodes) + "x" + std::to_string(p.param.tp) +
                                  "_" + p.param.algo + "_" + p.param.hier + "_" + p.param.dtype;
                         });

// A node is SIGKILLed during large all-reduces: every survivor exits with Error(kPeerLost)
// (exit code 3) well within the liveness timeout plus a margin.
// Ring, and the tree (where node 2 waits on node 0, which learns of the loss first and
// forwards the abort).
class MultiprocessFailureTest : public ::testing::TestWithParam<const char*> {};

TEST_P(MultiprocessFailureTest, PeerKilledMidLargeAllReduce) {
  auto procs = start(3,
                     {"--tp", "2", "--algo", GetParam(), "--hier", "sliced", "--counts", "4194304",
                      "--loop-seconds", "60", "--liveness-ms", "2000"},
                     std::string("kill_") + GetParam());
  for (auto& p : procs) ASSERT_TRUE(p->waitForLog("looping", 60s)) << p->log();
  const auto t0 = std::chrono::steady_clock::now();
  procs[1]->signal(SIGKILL);
  EXPECT_EQ(procs[1]->wait(5s), 128 + SIGKILL);
  for (int n : {0, 2}) {
    EXPECT_EQ(procs[n]->wait(15s), 3) << procs[n]->log();
    EXPECT_NE(procs[n]->log().find("peer-lost"), std::string::npos) << procs[n]->log();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 4500ms);  // liveness 2 s + margin
}

INSTANTIATE_TEST_SUITE_P(Algorithms, MultiprocessFailureTest, ::testing::Values("ring", "tree"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           return std::string(p.param);
                         });

}  // namespace
}  // namespace tpnode::collectives
