// Real tpnode processes forming meshes on loopback (127.0.0.x, fresh ports per test).
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <random>

#include <fmt/format.h>

#include "free_ports.h"
#include "process.h"

namespace tpnode::mesh::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class MeshProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "tpnode-mesh-XXXXXX";
    dir_ = ::mkdtemp(pattern.data());
  }
  void TearDown() override {
    if (HasFailure()) {
      for (auto& [name, p] : procs_) std::cerr << "---- " << name << " ----\n" << p->log();
    }
  }

  Process& start(const std::string& name, int id, const std::string& peers,
                 std::vector<std::string> extra = {}, std::string secret = "s3cret") {
    std::vector<std::string> args = {"--node-id", std::to_string(id), "--peers", peers};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<std::string> env;
    if (!secret.empty()) env.push_back("TPNODE_CLUSTER_SECRET=" + secret);
    procs_.emplace_back(name, std::make_unique<Process>(args, env, dir_ + "/" + name + ".log"));
    return *procs_.back().second;
  }

  static std::string addressOf(const std::string& peers, int id) {
    size_t start = 0;
    for (int i = 0; i < id; ++i) start = peers.find(',', start) + 1;
    return peers.substr(start, peers.find(',', start) - start);
  }

  void formMesh(int n, unsigned seed, int sockets_per_peer = 1) {
    std::string peers = loopbackPeers(n);
    std::vector<int> order(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
    std::mt19937 rng(seed);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<Process*> nodes(static_cast<size_t>(n));
    for (int id : order) {
      std::this_thread::sleep_for(milliseconds(rng() % 1200));
      nodes[static_cast<size_t>(id)] = &start(
          "node" + std::to_string(id), id, peers,
          {"--connect-timeout", "30", "--sockets-per-peer", std::to_string(sockets_per_peer)});
    }
    for (int id = 0; id < n; ++id) {
      Process& p = *nodes[static_cast<size_t>(id)];
      EXPECT_EQ(p.wait(seconds(40)), 0) << "node " << id;
      EXPECT_NE(p.log().find(fmt::format("[mesh] node {}/{} connected to all peers", id, n)),
                std::string::npos)
          << "node " << id;
    }
    std::string table = nodes[0]->log();
    EXPECT_NE(table.find("link round trips"), std::string::npos);
    EXPECT_NE(table.find(fmt::format("node {}", n - 1)), std::string::npos);
    for (int id = 0; id < n; ++id) {
      EXPECT_EQ(nodes[static_cast<size_t>(id)]->log().find("lost"), std::string::npos) << id;
    }
  }

  std::string dir_;
  std::vector<std::pair<std::string, std::unique_ptr<Process>>> procs_;
};

TEST_F(MeshProcessTest, TwoNodesInRandomOrderConnect) {
  formMesh(2, std::random_device{}());
}
TEST_F(MeshProcessTest, ThreeNodesInRandomOrderConnect) {
  formMesh(3, std::random_device{}());
}
TEST_F(MeshProcessTest, FourNodesInRandomOrderConnect) {
  formMesh(4, std::random_device{}());
}

TEST_F(MeshProcessTest, APeerThatRestartsDuringSetupIsTakenBackNotRefused) {
  std::string peers = loopbackPeers(3);
  std::vector<std::string> flags = {"--connect-timeout", "30", "--liveness-timeout", "1"};
  Process& n0 = start("node0", 0, peers, flags);
  Process& first = start("node2-first", 2, peers, flags);
  // Node 2 has connected to node 0 once node 0 sends it heartbeats; then it dies.
  std::this_thread::sleep_for(milliseconds(1500));
  first.signal(SIGKILL);
  EXPECT_NE(first.wait(seconds(5)), 0);
  Process& again = start("node2-again", 2, peers, flags);
  std::this_thread::sleep_for(milliseconds(500));
  Process& n1 = start("node1", 1, peers, flags);
  EXPECT_EQ(n0.wait(seconds(30)), 0);
  EXPECT_EQ(n1.wait(seconds(30)), 0);
  EXPECT_EQ(again.wait(seconds(30)), 0);
  EXPECT_NE(n0.log().find("lost node 2"), std::string::npos);
  EXPECT_EQ(n0.log().find("duplicate"), std::string::npos);
}

TEST_F(MeshProcessTest, AMissingPeerTimesOutNamingIt) {
  std::string peers = loopbackPeers(3);
  Process& n0 = start("node0", 0, peers, {"--connect-timeout", "3"});
  Process& n1 = start("node1", 1, peers, {"--connect-timeout", "3"});
  std::string missing = "node 2 at " + addressOf(peers, 2);
  for (Process* p : {&n0, &n1}) {
    EXPECT_NE(p->wait(seconds(15)), 0);
    // The progress line ("waiting for node 2 at 127.0.0.3:p, 2 s (...)") and the final error.
    EXPECT_NE(p->log().find("[mesh] waiting for " + missing + ", 2 s"), std::string::npos);
    size_t gave_up = p->log().find("gave up");
    ASSERT_NE(gave_up, std::string::npos);
    EXPECT_NE(p->log().find(missing, gave_up), std::string::npos);
  }
}

TEST_F(MeshProcessTest, AWrongSecretIsRefusedAndTheMeshWaitsForTheRightOne) {
  std::string peers = loopbackPeers(2);
  Process& n0 = start("node0", 0, peers, {"--connect-timeout", "20"});
  Process& bad = start("bad1", 1, peers, {"--connect-timeout", "2"}, "wrong-secret");
  EXPECT_NE(bad.wait(seconds(15)), 0);
  EXPECT_NE(bad.log().find("cluster secret"), std::string::npos);
  EXPECT_TRUE(n0.waitForLog("cluster secret: node 1 failed the HMAC challenge", seconds(5)));
  Process& good = start("good1", 1, peers, {"--connect-timeout", "20"});
  EXPECT_EQ(good.wait(seconds(30)), 0);
  EXPECT_EQ(n0.wait(seconds(30)), 0);
}

TEST_F(MeshProcessTest, AMissingSecretOnOneSideIsRefusedNamingBoth) {
  std::string peers = loopbackPeers(2);
  Process& n0 = start("node0", 0, peers, {"--connect-timeout", "2"});
  Process& n1 = start("node1", 1, peers, {"--connect-timeout", "2"}, "");
  for (Process* p : {&n0, &n1}) {
    EXPECT_NE(p->wait(seconds(15)), 0);
    EXPECT_NE(p->log().find("cluster secret: node"), std::string::npos);
  }
  EXPECT_NE(n0.log().find("node 0 has one, node 1 has none"), std::string::npos);
}

TEST_F(MeshProcessTest, AFingerprintMismatchIsRefusedOnBothSidesNamingTheField) {
  std::string peers = loopbackPeers(2);
  Process& n0 = start("node0", 0, peers, {"--connect-timeout", "2"});
  Process& n1 = start("node1", 1, peers, {"--connect-timeout", "2", "--tp", "2"});
  for (Process* p : {&n0, &n1}) {
    EXPECT_NE(p->wait(seconds(15)), 0);
    EXPECT_NE(p->log().find("cluster fingerprint differs"), std::string::npos);
  }
  EXPECT_NE(n0.log().find("tp_per_node: node 0 has '1,1', node 1 has '2,2'"), std::string::npos);
  EXPECT_NE(n1.log().find("tp_per_node: node 1 has '2,2', node 0 has '1,1'"), std::string::npos);
}

TEST_F(MeshProcessTest, ADuplicateNodeIdIsRefused) {
  // Node 2 is the highest id, so it only dials; two processes can claim it at once.
  std::string peers = loopbackPeers(3);
  Process& n0 = start("node0", 0, peers, {"--connect-timeout", "3"});
  Process& a = start("node2a", 2, peers, {"--connect-timeout", "3"});
  EXPECT_TRUE(a.waitForLog("", seconds(1)));
  std::this_thread::sleep_for(milliseconds(500));
  Process& b = start("node2b", 2, peers, {"--connect-timeout", "3"});
  EXPECT_NE(n0.wait(seconds(15)), 0);  // node 1 never comes
  a.wait(seconds(15));
  b.wait(seconds(15));
  EXPECT_NE(n0.log().find("duplicate node id 2"), std::string::npos);
  EXPECT_NE(b.log().find("refused us: duplicate node id 2"), std::string::npos);
}

// Makes a CA and a node certificate signed by it under dir/<name>.{pem,key}, dir/<name>-ca.pem.
bool makeCertificates(const std::string& dir, const std::string& name) {
  std::string d = dir + "/" + name;
  std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes ";
  std::string cmd = "openssl req -x509" + ec + "-keyout " + d + "-ca.key -out " + d +
                    "-ca.pem -days 1 -subj /CN=" + name + "-ca 2>/dev/null && openssl req" + ec +
                    "-keyout " + d + ".key -out " + d + ".csr -subj /CN=node 2>/dev/null && " +
                    "openssl x509 -req -in " + d + ".csr -CA " + d + "-ca.pem -CAkey " + d +
                    "-ca.key -CAcreateserial -out " + d + ".pem -days 1 2>/dev/null";
  return std::system(cmd.c_str()) == 0;
}

TEST_F(MeshProcessTest, MutualTlsConnectsAndACertificateFromAnotherCaIsRefused) {
  ASSERT_TRUE(makeCertificates(dir_, "cluster"));
  ASSERT_TRUE(makeCertificates(dir_, "rogue"));
  auto tls = [&](const std::string& name) {
    return std::vector<std::string>{
        "--tls-cert", dir_ + "/" + name + ".pem", "--tls-key",         dir_ + "/" + name + ".key",
        "--tls-ca",   dir_ + "/cluster-ca.pem",   "--connect-timeout", "20"};
  };
  std::string peers = loopbackPeers(2);
  Process& n0 = start("node0", 0, peers, tls("cluster"));
  std::vector<std::string> rogue_flags = tls("rogue");
  rogue_flags.back() = "2";
  Process& rogue = start("rogue1", 1, peers, rogue_flags);
  EXPECT_NE(rogue.wait(seconds(15)), 0);
  EXPECT_TRUE(n0.waitForLog("TLS handshake failed", seconds(5)));
  Process& good = start("node1", 1, peers, tls("cluster"));
  EXPECT_EQ(good.wait(seconds(30)), 0);
  EXPECT_EQ(n0.wait(seconds(30)), 0);
  EXPECT_NE(n0.log().find("link round trips"), std::string::npos);
}

// Forms a 3-node mesh that holds, then `sig`nals node 2; the others must notice in time.
void expectLossDetected(MeshProcessTest* t, Process& victim, Process& n0, Process& n1, int sig,
                        const std::string& reason) {
  ASSERT_TRUE(n0.waitForLog("holding the mesh", seconds(20)));
  ASSERT_TRUE(n1.waitForLog("holding the mesh", seconds(5)));
  ASSERT_TRUE(victim.waitForLog("holding the mesh", seconds(5)));
  auto t0 = std::chrono::steady_clock::now();
  victim.signal(sig);
  for (Process* p : {&n0, &n1}) {
    EXPECT_NE(p->wait(seconds(10)), 0);
    EXPECT_NE(p->log().find("lost node 2"), std::string::npos);
    EXPECT_NE(p->log().find(reason), std::string::npos);
  }
  // Liveness timeout 1 s; allow for process exit and a busy 2-core machine.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, seconds(4));
  (void)t;
}

TEST_F(MeshProcessTest, AKilledPeerIsDetected) {
  std::string peers = loopbackPeers(3);
  std::vector<std::string> flags = {"--mesh-hold", "30", "--liveness-timeout", "1"};
  Process& n0 = start("node0", 0, peers, flags);
  Process& n1 = start("node1", 1, peers, flags);
  Process& n2 = start("node2", 2, peers, flags);
  expectLossDetected(this, n2, n0, n1, SIGKILL, "without GOODBYE");
}

TEST_F(MeshProcessTest, ASilentPeerIsDetectedWithinTheLivenessTimeout) {
  std::string peers = loopbackPeers(3);
  std::vector<std::string> flags = {"--mesh-hold", "30", "--liveness-timeout", "1"};
  Process& n0 = start("node0", 0, peers, flags);
  Process& n1 = start("node1", 1, peers, flags);
  Process& n2 = start("node2", 2, peers, flags);
  expectLossDetected(this, n2, n0, n1, SIGSTOP, "silent for");
}

}  // namespace
}  // namespace tpnode::mesh::test
