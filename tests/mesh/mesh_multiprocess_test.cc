// Real tpnode processes forming meshes on loopback (127.0.0.x, fresh ports per test).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <random>

#include <fmt/format.h>

#include "free_ports.h"
#include "process.h"
#include "tests/support/test_env.h"

namespace tpnode::mesh::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class MeshProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = makeTempDir("tpnode-mesh-");
    secret_ = randomSecretHex();
  }

  void TearDown() override {
    if (HasFailure()) {
      for (auto& [name, p] : procs_) std::cerr << "---- " << name << " ----\n" << p->log();
    }
  }

  Process& start(const std::string& name, int id, const std::string& peers,
                 std::vector<std::string> extra = {}, std::optional<std::string> secret = {}) {
    std::vector<std::string> args = {"--node-id", std::to_string(id), "--peers", peers};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<std::string> env;
    std::string s = secret.value_or(secret_);
    if (!s.empty()) env.push_back("TPNODE_CLUSTER_SECRET=" + s);
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
  std::string secret_;
  std::vector<std::pair<std::string, std::unique_ptr<Process>>> procs_;
};

// The seed of a random start order: TPNODE_TEST_SEED when set (to replay a failure), else
// gtest's --gtest_random_seed when given, else a fresh one. Printed, and recorded in the
// test's XML output, so that any run can be replayed.
int32_t gtestSeedFlag() {
#ifdef GTEST_FLAG_GET
  return GTEST_FLAG_GET(random_seed);
#else
  return ::testing::GTEST_FLAG(random_seed);
#endif
}

unsigned startOrderSeed() {
  unsigned seed = 0;
  if (const auto v = testing_support::testEnv("TPNODE_TEST_SEED")) {
    seed = static_cast<unsigned>(std::strtoul(v->c_str(), nullptr, 10));
  } else if (gtestSeedFlag() != 0) {
    seed = static_cast<unsigned>(gtestSeedFlag());
  } else {
    seed = std::random_device{}();
  }
  std::printf("[ seed ] start order seed %u (replay: TPNODE_TEST_SEED=%u)\n", seed, seed);
  std::fflush(stdout);
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  return seed;
}

TEST_F(MeshProcessTest, TwoNodesInRandomOrderConnect) {
  formMesh(2, startOrderSeed());
}
TEST_F(MeshProcessTest, ThreeNodesInRandomOrderConnect) {
  formMesh(3, startOrderSeed());
}
TEST_F(MeshProcessTest, FourNodesInRandomOrderConnect) {
  formMesh(4, startOrderSeed());
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
  Process& bad = start("bad1", 1, peers, {"--connect-timeout", "2"}, randomSecretHex());
  EXPECT_NE(bad.wait(seconds(15)), 0);
  EXPECT_NE(bad.log().find("refused us: authentication failed"), std::string::npos);
  EXPECT_TRUE(
      n0.waitForLog("a peer claiming node 1 failed the HMAC challenge of node 0", seconds(5)));
  Process& good = start("good1", 1, peers, {"--connect-timeout", "20"});
  EXPECT_EQ(good.wait(seconds(30)), 0);
  EXPECT_EQ(n0.wait(seconds(30)), 0);
}

TEST_F(MeshProcessTest, AMissingSecretOnOneSideIsRefusedNamingBoth) {
  std::string peers = loopbackPeers(2);
  Process& n0 = start("node0", 0, peers, {"--connect-timeout", "2"});
  Process& n1 = start("node1", 1, peers, {"--connect-timeout", "2", "--insecure"}, "");
  for (Process* p : {&n0, &n1}) EXPECT_NE(p->wait(seconds(15)), 0);
  // The node without a secret learns only that it failed; node 0's log says why.
  EXPECT_NE(n0.log().find("cluster secret: node 0 has one, node 1 has none"), std::string::npos);
  EXPECT_NE(n1.log().find("refused us: authentication failed"), std::string::npos);
  EXPECT_NE(n1.log().find("--insecure"), std::string::npos);
}

TEST_F(MeshProcessTest, AFingerprintMismatchIsRefusedOnBothSidesNamingTheField) {
  std::string peers = loopbackPeers(2);
  Process& n0 = start("node0", 0, peers, {"--connect-timeout", "2"});
  Process& n1 = start("node1", 1, peers, {"--connect-timeout", "2", "--tp", "2"});
  for (Process* p : {&n0, &n1}) {
    EXPECT_NE(p->wait(seconds(15)), 0);
    EXPECT_NE(p->log().find("cluster fingerprint differs"), std::string::npos);
  }
  // The dialer compares, once node 0 proved the secret, and tells node 0.
  EXPECT_NE(n0.log().find("tp_per_node: node 1 has '2,2', node 0 has '1,1'"), std::string::npos);
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

// Makes a CA under dir/<ca>-ca.{pem,key}.
bool makeCa(const std::string& dir, const std::string& ca) {
  std::string d = dir + "/" + ca;
  std::string cmd =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
      "-keyout " +
      d + "-ca.key -out " + d + "-ca.pem -days 1 -subj /CN=" + ca + "-ca 2>/dev/null";
  return std::system(cmd.c_str()) == 0;
}

// Makes dir/<name>.{pem,key} signed by dir/<ca>-ca: subject CN `cn`, and DNS SAN `san` if given.
bool makeCert(const std::string& dir, const std::string& ca, const std::string& name,
              const std::string& cn, const std::string& san = {}) {
  std::string d = dir + "/" + name;
  std::string c = dir + "/" + ca;
  std::string ext;
  if (!san.empty()) {
    std::ofstream(d + ".ext") << "subjectAltName=DNS:" << san << "\n";
    ext = " -extfile " + d + ".ext";
  }
  std::string cmd = "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " +
                    d + ".key -out " + d + ".csr -subj /CN=" + cn +
                    " 2>/dev/null && openssl x509 -req -in " + d + ".csr -CA " + c +
                    "-ca.pem -CAkey " + c + "-ca.key -CAcreateserial -out " + d + ".pem -days 1" +
                    ext + " 2>/dev/null";
  return std::system(cmd.c_str()) == 0;
}

std::vector<std::string> tlsFlags(const std::string& dir, const std::string& name,
                                  const std::string& ca, const std::string& timeout) {
  return {"--tls-cert", dir + "/" + name + ".pem",  "--tls-key",         dir + "/" + name + ".key",
          "--tls-ca",   dir + "/" + ca + "-ca.pem", "--connect-timeout", timeout};
}

TEST_F(MeshProcessTest, MutualTlsConnectsAndACertificateFromAnotherCaIsRefused) {
  ASSERT_TRUE(makeCa(dir_, "cluster"));
  ASSERT_TRUE(makeCa(dir_, "rogue"));
  ASSERT_TRUE(makeCert(dir_, "cluster", "node0", "tpnode-node-0"));
  ASSERT_TRUE(makeCert(dir_, "cluster", "node1", "node-one", "tpnode-node-1"));  // DNS SAN
  ASSERT_TRUE(makeCert(dir_, "rogue", "rogue1", "tpnode-node-1"));
  std::string peers = loopbackPeers(2);
  Process& n0 = start("node0", 0, peers, tlsFlags(dir_, "node0", "cluster", "20"));
  std::vector<std::string> rogue_flags = tlsFlags(dir_, "rogue1", "cluster", "2");
  Process& rogue = start("rogue1", 1, peers, rogue_flags);
  EXPECT_NE(rogue.wait(seconds(15)), 0);
  EXPECT_TRUE(n0.waitForLog("TLS handshake failed", seconds(5)));
  Process& good = start("node1", 1, peers, tlsFlags(dir_, "node1", "cluster", "20"));
  EXPECT_EQ(good.wait(seconds(30)), 0);
  EXPECT_EQ(n0.wait(seconds(30)), 0);
  EXPECT_NE(n0.log().find("link round trips"), std::string::npos);
}

TEST_F(MeshProcessTest, MutualTlsWithoutASecretBindsTheNodeIdToTheCertificate) {
  // A certificate of the cluster CA that names node 2 cannot join as node 1.
  ASSERT_TRUE(makeCa(dir_, "cluster"));
  ASSERT_TRUE(makeCert(dir_, "cluster", "node0", "tpnode-node-0"));
  ASSERT_TRUE(makeCert(dir_, "cluster", "node1", "tpnode-node-1"));
  ASSERT_TRUE(makeCert(dir_, "cluster", "node2", "tpnode-node-2"));
  std::string peers = loopbackPeers(2);
  Process& n0 = start("node0", 0, peers, tlsFlags(dir_, "node0", "cluster", "20"), "");
  Process& impostor = start("impostor1", 1, peers, tlsFlags(dir_, "node2", "cluster", "2"), "");
  EXPECT_NE(impostor.wait(seconds(15)), 0);
  EXPECT_TRUE(n0.waitForLog("claims to be node 1 but its certificate names node(s) 2", seconds(5)));
  EXPECT_NE(impostor.log().find("refused us: authentication failed"), std::string::npos);
  Process& good = start("node1", 1, peers, tlsFlags(dir_, "node1", "cluster", "20"), "");
  EXPECT_EQ(good.wait(seconds(30)), 0);
  EXPECT_EQ(n0.wait(seconds(30)), 0);
  EXPECT_EQ(n0.log().find("--insecure"), std::string::npos);  // TLS alone is not insecure
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
