// The tptopo binary, as operators run it: alone (no GPU here: the CUDA checks must say so and
// the CPU checks still run), with bad flags, and as 2- and 3-node clusters on loopback; a peer
// killed or stopped mid-test fails its links within the liveness timeout instead of hanging.
// Every JSON report is checked against the schema in docs/tptopo.md.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>

#include "tests/mesh/free_ports.h"
#include "tests/mesh/process.h"
#include "tests/model/reference_data.h"
#include "tests/support/test_env.h"

namespace tpnode::tptopo {
namespace {

using mesh::test::Process;
using namespace std::chrono_literals;
using nlohmann::json;

std::string tptopoBin() {
  return testing_support::testEnv("TPTOPO_BIN").value_or(TPTOPO_TEST_BIN);
}

// Flags that keep a run short on a small machine, unless `args` sets them.
std::vector<std::string> quick(std::vector<std::string> args) {
  const std::vector<std::pair<std::string, std::string>> defaults = {
      {"--mem-mib", "4"},   {"--mem-reps", "1"},        {"--rtt-rounds", "50"}, {"--bw-mib", "1"},
      {"--bw-rounds", "4"}, {"--allreduce-iters", "3"}, {"--gpu-mib", "4"}};
  for (const auto& [flag, value] : defaults) {
    if (std::find(args.begin(), args.end(), flag) == args.end()) {
      args.push_back(flag);
      args.push_back(value);
    }
  }
  return args;
}

std::unique_ptr<Process> start(const std::vector<std::string>& args, const std::string& name) {
  return std::make_unique<Process>(args,
                                   std::vector<std::string>{mesh::test::testClusterSecretEnv()},
                                   ::testing::TempDir() + "/tptopo_" + name + ".log", tptopoBin());
}

// The JSON object of a --json run: stdout and stderr share the log; the object is the text
// from the line "{" to the last line "}".
json reportOf(const Process& p) {
  const std::string log = "\n" + p.log();
  const size_t begin = log.find("\n{\n");
  const size_t end = log.rfind("\n}\n");
  if (begin == std::string::npos || end == std::string::npos || end < begin) {
    ADD_FAILURE() << "no JSON report in:\n" << log;
    return json::object();
  }
  try {
    return json::parse(log.substr(begin + 1, end + 2 - (begin + 1)));
  } catch (const json::exception& e) {
    ADD_FAILURE() << "malformed JSON report (" << e.what() << ") in:\n" << log;
    return json::object();
  }
}

bool isVerdict(const json& v) {
  return v.is_string() && (v == "ok" || v == "skipped" || v == "degraded" || v == "failed");
}

// The schema of docs/tptopo.md: fields and their types.
void expectSchema(const json& j) {
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.at("tool"), "tptopo");
  EXPECT_EQ(j.at("schema_version"), 1);
  EXPECT_TRUE(j.at("version").is_string());
  EXPECT_TRUE(j.at("mode").is_string());
  EXPECT_TRUE(j.at("node_id").is_number_integer());
  EXPECT_TRUE(j.at("nodes").is_number_integer());
  EXPECT_TRUE(isVerdict(j.at("verdict")));
  EXPECT_TRUE(j.at("exit_code").is_number_integer());
  const json& layout = j.at("layout");
  EXPECT_TRUE(layout.at("ranks_per_node").is_array());
  for (const json& n : layout.at("ranks_per_node")) EXPECT_TRUE(n.is_number_integer());
  EXPECT_TRUE(layout.at("ranks").is_number_integer());
  EXPECT_TRUE(layout.at("runnable").is_boolean());
  EXPECT_TRUE(layout.at("description").is_string());
  EXPECT_TRUE(layout.at("refusal").is_string());
  const json& t = j.at("transport");
  for (const char* k : {"description", "local", "inter_algo", "hier_mode", "wire_format"}) {
    EXPECT_TRUE(t.at(k).is_string()) << k;
  }
  EXPECT_TRUE(t.at("crossover_bytes").is_number_unsigned());
  EXPECT_TRUE(t.at("leader_max_bytes").is_number_unsigned());
  for (const json& h : j.at("hosts")) {
    EXPECT_TRUE(h.at("node").is_number_integer());
    EXPECT_TRUE(h.at("hostname").is_string());
    const json& c = h.at("cpu");
    EXPECT_TRUE(c.at("model").is_string());
    EXPECT_GT(c.at("cores").get<int>(), 0);
    EXPECT_GT(c.at("allowed_cores").get<int>(), 0);
    EXPECT_GT(c.at("numa_nodes").get<int>(), 0);
    EXPECT_TRUE(c.at("simd").is_string());
    EXPECT_GT(c.at("mem_copy_gbps").get<double>(), 0);
    EXPECT_GT(c.at("mem_read_gbps").get<double>(), 0);
    const json& g = h.at("cuda");
    EXPECT_TRUE(g.at("built").is_boolean());
    EXPECT_TRUE(g.at("available").is_boolean());
    for (const char* k : {"reason", "driver_version", "runtime_version", "nccl_version"}) {
      EXPECT_TRUE(g.at(k).is_string()) << k;
    }
    EXPECT_TRUE(g.at("devices").is_array());
    EXPECT_TRUE(g.at("p2p").is_array());
    EXPECT_TRUE(g.at("staging").is_array());
    EXPECT_TRUE(g.at("nccl").at("ran").is_boolean());
    EXPECT_TRUE(h.at("checks").is_array());
  }
  for (const json& l : j.at("links")) {
    EXPECT_TRUE(l.at("a").is_number_integer());
    EXPECT_TRUE(l.at("b").is_number_integer());
    EXPECT_LT(l.at("a").get<int>(), l.at("b").get<int>());
    EXPECT_TRUE(l.at("measured").is_boolean());
    EXPECT_TRUE(isVerdict(l.at("verdict")));
    for (const char* k : {"rtt_us_p50", "rtt_us_p99", "gbps_ab", "gbps_ba"}) {
      EXPECT_TRUE(l.at(k).is_number()) << k;
    }
    EXPECT_TRUE(l.at("rtt_rounds").is_number_integer());
    EXPECT_TRUE(l.at("bw_bytes").is_number_unsigned());
    EXPECT_TRUE(l.at("error").is_string());
  }
  const json& ar = j.at("allreduce");
  EXPECT_TRUE(ar.at("ran").is_boolean());
  EXPECT_TRUE(isVerdict(ar.at("verdict")));
  EXPECT_TRUE(ar.at("ranks").is_number_integer());
  EXPECT_TRUE(ar.at("error").is_string());
  for (const json& c : ar.at("cases")) {
    EXPECT_TRUE(c.at("bytes").is_number_unsigned());
    EXPECT_TRUE(c.at("hier").is_string());
    EXPECT_TRUE(c.at("inter").is_string());
    EXPECT_TRUE(c.at("ok").is_boolean());
  }
  for (const json& b : ar.at("bench")) {
    EXPECT_GT(b.at("us_p50").get<double>(), 0);
    EXPECT_TRUE(b.at("busbw_gbps").is_number());
  }
  const json& plan = j.at("plan");
  EXPECT_TRUE(plan.at("ran").is_boolean());
  EXPECT_TRUE(plan.at("model").is_string());
  EXPECT_TRUE(plan.at("parallel").is_number_integer());
  EXPECT_TRUE(plan.at("rtt_us").is_number());
  EXPECT_TRUE(plan.at("link_gbps").is_number());
  EXPECT_TRUE(plan.at("rank_read_gbps").is_number());
  EXPECT_TRUE(plan.at("rank_gmacs").is_number());
  EXPECT_TRUE(plan.at("rank_rates_source").is_string());
  EXPECT_TRUE(plan.at("chosen").is_string());
  EXPECT_TRUE(plan.at("error").is_string());
  for (const json& c : plan.at("candidates")) {
    EXPECT_TRUE(c.at("name").is_string());
    EXPECT_TRUE(c.at("stages").is_number_integer());
    EXPECT_TRUE(c.at("nodes_per_stage").is_number_integer());
    EXPECT_TRUE(c.at("layers").is_string());
    EXPECT_TRUE(c.at("batch1_tokens_per_s").is_number());
    EXPECT_TRUE(c.at("batch1_step_ms").is_number());
    EXPECT_TRUE(c.at("batch_tokens_per_s").is_number());
    EXPECT_TRUE(c.at("refused").is_string());
    EXPECT_TRUE(c.at("chosen").is_boolean());
  }
  for (const json& c : j.at("checks")) {
    EXPECT_TRUE(c.at("name").is_string());
    EXPECT_TRUE(c.at("scope").is_string());
    EXPECT_TRUE(isVerdict(c.at("verdict")));
    EXPECT_TRUE(c.at("detail").is_string());
  }
}

const json* findCheck(const json& j, const std::string& name, const std::string& scope) {
  for (const json& c : j.at("checks")) {
    if (c.at("name") == name && c.at("scope") == scope) return &c;
  }
  return nullptr;
}

// The exit code matches the worst verdict (docs/tptopo.md).
int exitCodeFor(const json& j) {
  const std::string v = j.at("verdict");
  return v == "failed" ? 1 : v == "degraded" ? 4 : 0;
}

TEST(TptopoLocal, ReportsNoGpuAndRunsTheCpuChecks) {
  auto p = start(quick({"--json"}), "local");
  const int code = p->wait(60s);
  json j = reportOf(*p);
  expectSchema(j);
  EXPECT_EQ(j.at("mode"), "local");
  EXPECT_EQ(j.at("nodes"), 1);
  ASSERT_EQ(j.at("hosts").size(), 1u);
  const json& cuda = j.at("hosts").at(0).at("cuda");
  EXPECT_FALSE(cuda.at("available").get<bool>());
  EXPECT_FALSE(cuda.at("reason").get<std::string>().empty());
  const json* gpu = findCheck(j, "gpu.devices", "node 0");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->at("verdict"), "skipped");
  EXPECT_EQ(gpu->at("detail").get<std::string>().rfind("no CUDA device: ", 0), 0u);
  for (const char* name : {"cpu.cores", "cpu.simd", "cpu.memory", "placement"}) {
    EXPECT_NE(findCheck(j, name, "node 0"), nullptr) << name;
  }
  EXPECT_EQ(findCheck(j, "placement", "node 0")->at("verdict"), "ok");
  EXPECT_EQ(j.at("allreduce").at("verdict"), "skipped");  // one rank
  EXPECT_FALSE(j.at("allreduce").at("ran").get<bool>());
  EXPECT_NE(j.at("verdict"), "failed");
  EXPECT_EQ(code, exitCodeFor(j));
  EXPECT_EQ(code, j.at("exit_code").get<int>());
}

TEST(TptopoLocal, LocalGroupAllReduceWithTwoRanks) {
  auto p = start(quick({"--json", "--tp", "2"}), "local_tp2");
  const int code = p->wait(60s);
  json j = reportOf(*p);
  expectSchema(j);
  const json& ar = j.at("allreduce");
  EXPECT_EQ(ar.at("verdict"), "ok") << ar.dump();
  EXPECT_EQ(ar.at("ranks"), 2);
  ASSERT_EQ(ar.at("cases").size(), 3u);
  for (const json& c : ar.at("cases")) EXPECT_TRUE(c.at("ok").get<bool>());
  EXPECT_EQ(code, exitCodeFor(j));
}

TEST(TptopoLocal, TableByDefault) {
  auto p = start(quick({}), "table");
  const int code = p->wait(60s);
  const std::string log = p->log();
  EXPECT_TRUE(code == 0 || code == 4) << log;
  EXPECT_NE(log.find("no CUDA device: "), std::string::npos) << log;
  EXPECT_NE(log.find("Checks"), std::string::npos);
  EXPECT_NE(log.find("Transport tpnode would use: local: CPU shared-memory group"),
            std::string::npos);
  EXPECT_NE(log.find("[tptopo] measuring memory bandwidth"), std::string::npos);  // progress
  EXPECT_NE(log.find("verdict: "), std::string::npos);
}

TEST(TptopoLocal, ImpossiblePlacementFails) {
  auto p = start(quick({"--json", "--tp", "4096"}), "placement");
  const int code = p->wait(60s);
  json j = reportOf(*p);
  expectSchema(j);
  const json* c = findCheck(j, "placement", "node 0");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->at("verdict"), "failed");
  EXPECT_NE(c->at("detail").get<std::string>().find("--tp 4096"), std::string::npos);
  EXPECT_EQ(j.at("verdict"), "failed");
  EXPECT_EQ(code, 1);
}

TEST(TptopoLocal, UsageErrorsExitTwo) {
  EXPECT_EQ(start({"--no-such-flag"}, "usage1")->wait(30s), 2);
  EXPECT_EQ(start({"--rtt-rounds", "0"}, "usage2")->wait(30s), 2);
  EXPECT_EQ(start({"--node-id", "3", "--peers", "127.0.0.1:1,127.0.0.1:2"}, "usage3")->wait(30s),
            2);
  EXPECT_EQ(start({"--config", "/nonexistent.yaml"}, "usage4")->wait(30s), 2);
  EXPECT_EQ(start({"--help"}, "help")->wait(30s), 0);
}

class TptopoCluster : public ::testing::Test {
 protected:
  // `liveness_s`: the healthy runs leave room for a loaded CI machine; the cut-off runs use a
  // short one so that the failure shows quickly.
  std::vector<std::unique_ptr<Process>> startCluster(int n, const std::string& name,
                                                     std::vector<std::string> extra = {},
                                                     const std::string& liveness_s = "5") {
    peers_ = mesh::test::loopbackPeers(n);
    std::vector<std::unique_ptr<Process>> nodes;
    for (int i = 0; i < n; ++i) {
      std::vector<std::string> a = {
          "--json", "--node-id",          std::to_string(i), "--peers", peers_, "--connect-timeout",
          "60",     "--liveness-timeout", liveness_s};
      a.insert(a.end(), extra.begin(), extra.end());
      nodes.push_back(start(quick(a), name + "_n" + std::to_string(i)));
    }
    return nodes;
  }
  std::string peers_;
};

void expectHealthyCluster(const json& j, int n) {
  expectSchema(j);
  EXPECT_EQ(j.at("mode"), "cluster");
  EXPECT_EQ(j.at("nodes"), n);
  EXPECT_EQ(j.at("hosts").size(), static_cast<size_t>(n));
  ASSERT_EQ(j.at("links").size(), static_cast<size_t>(n * (n - 1) / 2));
  for (const json& l : j.at("links")) {
    EXPECT_NE(l.at("verdict"), "failed") << l.dump();
    EXPECT_TRUE(l.at("measured").get<bool>());
    EXPECT_GT(l.at("rtt_us_p50").get<double>(), 0);
    EXPECT_GE(l.at("rtt_us_p99").get<double>(), l.at("rtt_us_p50").get<double>());
    EXPECT_GT(l.at("gbps_ab").get<double>(), 0);
    EXPECT_GT(l.at("gbps_ba").get<double>(), 0);
    EXPECT_EQ(l.at("rtt_rounds"), 50);
    EXPECT_EQ(l.at("bw_bytes"), 4u << 20);
  }
  const json& ar = j.at("allreduce");
  EXPECT_EQ(ar.at("verdict"), "ok") << ar.dump();
  ASSERT_EQ(ar.at("cases").size(), 3u);
  for (const json& c : ar.at("cases")) EXPECT_TRUE(c.at("ok").get<bool>()) << c.dump();
  // The default thresholds: 1 KiB leader, 64 KiB sliced, both below the ring crossover (3 nodes:
  // direct or tree, whichever the startup probe measured faster, the same for both); 1 MiB
  // sliced/ring.
  EXPECT_EQ(ar.at("cases").at(0).at("hier"), "leader");
  const std::string small = ar.at("cases").at(0).at("inter");
  EXPECT_TRUE(small == "direct" || small == "tree") << small;
  EXPECT_EQ(ar.at("cases").at(1).at("inter"), small);
  EXPECT_EQ(ar.at("cases").at(2).at("inter"), "ring");
  EXPECT_EQ(ar.at("bench").size(), 2u);
  EXPECT_NE(j.at("verdict"), "failed");
}

TEST_F(TptopoCluster, TwoNodes) {
  // With --plan-model node 0 also reports the plans --split auto compares on these links.
  auto nodes =
      startCluster(2, "two", {"--plan-model", testing_support::referenceModel("llama-tiny-f32")});
  const int c0 = nodes[0]->wait(120s);
  const int c1 = nodes[1]->wait(30s);
  json j = reportOf(*nodes[0]);
  expectHealthyCluster(j, 2);
  EXPECT_EQ(c0, exitCodeFor(j)) << nodes[0]->log();
  EXPECT_EQ(j.at("allreduce").at("ranks"), 2);
  const json& plan = j.at("plan");
  EXPECT_TRUE(plan.at("ran").get<bool>());
  EXPECT_EQ(plan.at("error"), "") << plan.dump();
  ASSERT_EQ(plan.at("candidates").size(), 2u) << plan.dump();
  EXPECT_EQ(plan.at("candidates").at(0).at("name"), "tensor 2x1");
  EXPECT_EQ(plan.at("candidates").at(1).at("layers"), "0-0,1-1");
  EXPECT_NE(plan.at("chosen"), "");
  // Node 0 measured its ranks (the figures' size depends on the machine, not checked).
  EXPECT_GT(plan.at("rank_read_gbps").get<double>(), 0);
  EXPECT_GT(plan.at("rank_gmacs").get<double>(), 0);
  EXPECT_EQ(plan.at("rank_rates_source"), "measured on node 0, for every node");
  json member = reportOf(*nodes[1]);
  EXPECT_FALSE(member.at("plan").at("ran").get<bool>());
  expectSchema(member);
  EXPECT_EQ(member.at("mode"), "cluster-member");
  EXPECT_EQ(c1, exitCodeFor(member)) << nodes[1]->log();
}

// A layout tpnode refuses (nodes with different --tp) is still tested and reported: the mesh
// forms, the link is measured, the layout check fails with Topology's reason and the all-reduce
// is skipped saying why (on both nodes, so neither waits for the other).
TEST_F(TptopoCluster, MixedLayoutIsReportedWithTheReason) {
  const std::string peers = mesh::test::loopbackPeers(2);
  std::vector<std::unique_ptr<Process>> nodes;
  for (int i = 0; i < 2; ++i) {
    nodes.push_back(
        start(quick({"--json", "--node-id", std::to_string(i), "--peers", peers, "--tp-layout",
                     "2,1", "--tp", i == 0 ? "2" : "1", "--connect-timeout", "60"}),
              "mixed_n" + std::to_string(i)));
  }
  const int c0 = nodes[0]->wait(120s);
  const int c1 = nodes[1]->wait(30s);
  json j = reportOf(*nodes[0]);
  expectSchema(j);
  EXPECT_EQ(j.at("nodes"), 2);
  const json& layout = j.at("layout");
  EXPECT_EQ(layout.at("ranks_per_node"), json::array({2, 1}));
  EXPECT_EQ(layout.at("ranks"), 3);
  EXPECT_FALSE(layout.at("runnable").get<bool>());
  EXPECT_EQ(layout.at("description"),
            "2 nodes, 3 ranks: node 0 global ranks 0..1, node 1 global rank 2");
  const std::string reason =
      "--tp-layout 2,1: nodes with different tp degrees are not supported yet";
  EXPECT_EQ(layout.at("refusal").get<std::string>().rfind(reason, 0), 0u) << layout.dump();
  const json* check = findCheck(j, "layout", "cluster");
  ASSERT_NE(check, nullptr);
  EXPECT_EQ(check->at("verdict"), "failed");
  EXPECT_NE(check->at("detail").get<std::string>().find(reason), std::string::npos);
  ASSERT_EQ(j.at("links").size(), 1u);
  EXPECT_NE(j.at("links").at(0).at("verdict"), "failed") << j.at("links").dump();
  EXPECT_TRUE(j.at("links").at(0).at("measured").get<bool>());
  const json& ar = j.at("allreduce");
  EXPECT_EQ(ar.at("verdict"), "skipped");
  EXPECT_EQ(ar.at("ranks"), 3);
  EXPECT_NE(ar.at("error").get<std::string>().find(reason), std::string::npos) << ar.dump();
  EXPECT_EQ(j.at("verdict"), "failed");
  EXPECT_EQ(c0, 1) << nodes[0]->log();
  json member = reportOf(*nodes[1]);
  EXPECT_EQ(findCheck(member, "layout", "cluster")->at("verdict"), "failed");
  EXPECT_EQ(c1, 1) << nodes[1]->log();
}

TEST_F(TptopoCluster, ThreeNodesTwoRanksEach) {
  auto nodes = startCluster(3, "three", {"--tp", "2", "--devices", "0,0"});
  const int c0 = nodes[0]->wait(150s);
  for (size_t i = 1; i < nodes.size(); ++i) EXPECT_NE(nodes[i]->wait(30s), -1);
  json j = reportOf(*nodes[0]);
  expectHealthyCluster(j, 3);
  EXPECT_EQ(j.at("allreduce").at("ranks"), 6);
  EXPECT_EQ(c0, exitCodeFor(j)) << nodes[0]->log();
}

TEST_F(TptopoCluster, SlowLinksAreDegradedWithExitCodeFour) {
  // No loopback link reaches 1e6 GB/s: every link is degraded, nothing failed.
  auto nodes = startCluster(2, "degraded", {"--min-link-gbps", "1000000"});
  const int c0 = nodes[0]->wait(120s);
  EXPECT_NE(nodes[1]->wait(30s), -1);
  json j = reportOf(*nodes[0]);
  expectSchema(j);
  ASSERT_EQ(j.at("links").size(), 1u);
  EXPECT_EQ(j.at("links").at(0).at("verdict"), "degraded");
  EXPECT_NE(j.at("links").at(0).at("error").get<std::string>().find("--min-link-gbps"),
            std::string::npos);
  EXPECT_EQ(j.at("verdict"), "degraded");
  EXPECT_EQ(c0, 4) << nodes[0]->log();
}

TEST_F(TptopoCluster, WatchdogEndsARunThatCannotFinish) {
  // Node 1 never comes and the connect timeout is long: --timeout ends the run with code 3.
  peers_ = mesh::test::loopbackPeers(2);
  auto p = start(
      quick({"--node-id", "0", "--peers", peers_, "--connect-timeout", "60", "--timeout", "2"}),
      "watchdog");
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(p->wait(30s), 3) << p->log();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
  EXPECT_NE(p->log().find("did not finish within 2 s"), std::string::npos) << p->log();
}

TEST_F(TptopoCluster, TptopoAndTpnodeDoNotMix) {
  // A tpnode mesh smoke test on node 1's port: the fingerprints differ, so node 0 refuses it
  // and reports the mesh as failed when the connect timeout passes.
  peers_ = mesh::test::loopbackPeers(2);
  auto topo = start(
      quick({"--json", "--node-id", "0", "--peers", peers_, "--connect-timeout", "4"}), "mix_topo");
  Process tpnode({"--node-id", "1", "--peers", peers_, "--connect-timeout", "4"},
                 {mesh::test::testClusterSecretEnv()},
                 ::testing::TempDir() + "/tptopo_mix_tpnode.log");
  const int code = topo->wait(60s);
  json j = reportOf(*topo);
  expectSchema(j);
  const json* mesh = findCheck(j, "mesh", "node 0");
  ASSERT_NE(mesh, nullptr) << topo->log();
  EXPECT_EQ(mesh->at("verdict"), "failed");
  EXPECT_EQ(code, 1);
  // The refusal names the differing fingerprint key.
  EXPECT_NE(topo->log().find("node 0 has 'tptopo'"), std::string::npos) << topo->log();
  tpnode.wait(30s);
}

// The same YAML config tpnode reads (nodes, secret file, timeouts), on every node.
class TptopoConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/tptopo_config_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir_);
    writeSecret("secret", "s3cret-of-the-cluster");
    writeSecret("other", "another-secret-of-the-cluster");
    std::ofstream yaml(dir_ + "/cluster.yaml");
    yaml << "nodes:\n"
         << "  - {host: 127.0.0.1, port: " << mesh::test::freePort("127.0.0.1") << ", tp: 1}\n"
         << "  - {host: 127.0.0.2, port: " << mesh::test::freePort("127.0.0.2") << ", tp: 1}\n"
         << "cluster:\n  secret_file: secret\n  connect_timeout_s: 5\n"
         << "  liveness_timeout_s: 5\n";
  }
  void writeSecret(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text << "\n";
    std::filesystem::permissions(
        path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  }
  std::unique_ptr<Process> node(int id, const std::string& name,
                                std::vector<std::string> extra = {}) {
    std::vector<std::string> a = {"--json", "--config", dir_ + "/cluster.yaml", "--node-id",
                                  std::to_string(id)};
    a.insert(a.end(), extra.begin(), extra.end());
    return start(quick(a), name);
  }
  std::string dir_;
};

TEST_F(TptopoConfig, ConfigFileAndSecret) {
  auto n1 = node(1, "config_n1");
  auto n0 = node(0, "config_n0");
  const int c0 = n0->wait(120s);
  EXPECT_NE(n1->wait(30s), -1);
  json j = reportOf(*n0);
  expectHealthyCluster(j, 2);
  EXPECT_EQ(c0, exitCodeFor(j));
}

TEST_F(TptopoConfig, WrongSecretFailsTheMesh) {
  auto n1 = node(1, "secret_n1", {"--cluster-secret-file", dir_ + "/other"});
  auto n0 = node(0, "secret_n0");
  const int c0 = n0->wait(60s);
  const int c1 = n1->wait(60s);
  json j = reportOf(*n0);
  expectSchema(j);
  const json* mesh = findCheck(j, "mesh", "node 0");
  ASSERT_NE(mesh, nullptr) << n0->log();
  EXPECT_EQ(mesh->at("verdict"), "failed");
  EXPECT_NE(mesh->at("detail").get<std::string>().find("node 1"), std::string::npos)
      << mesh->dump();
  EXPECT_EQ(c0, 1);
  EXPECT_EQ(c1, 1);
}

// Node `victim` gets `sig` once it has reached the bandwidth phase of its link with node 0
// (mid-test: the mesh is up, links are being measured); its links must come out "failed" on
// node 0 within the liveness timeout (2 s) plus slack, the others not, and every surviving
// node must exit 1 instead of hanging.
void peerCutOff(TptopoCluster& test, int n, int victim, int sig, const std::string& name,
                std::vector<std::unique_ptr<Process>>& nodes) {
  (void)test;
  const std::string marker = "link 0-" + std::to_string(victim) + ": bandwidth";
  ASSERT_TRUE(nodes[static_cast<size_t>(victim)]->waitForLog(marker, 90s))
      << nodes[static_cast<size_t>(victim)]->log();
  nodes[static_cast<size_t>(victim)]->signal(sig);
  const auto t0 = std::chrono::steady_clock::now();
  const int code = nodes[0]->wait(60s);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_NE(code, -1) << "node 0 hung:\n" << nodes[0]->log();
  EXPECT_LT(took, 30s);
  EXPECT_EQ(code, 1) << nodes[0]->log();
  json j = reportOf(*nodes[0]);
  expectSchema(j);
  EXPECT_EQ(j.at("verdict"), "failed");
  for (const json& l : j.at("links")) {
    const bool touches = l.at("a") == victim || l.at("b") == victim;
    if (touches) {
      EXPECT_EQ(l.at("verdict"), "failed") << name << ": " << l.dump();
    } else {
      EXPECT_NE(l.at("verdict"), "failed") << name << ": " << l.dump();
    }
  }
  EXPECT_EQ(j.at("allreduce").at("verdict"), "failed");
  const json* report = findCheck(j, "report", "node " + std::to_string(victim));
  ASSERT_NE(report, nullptr);
  EXPECT_EQ(report->at("verdict"), "failed");
  for (int i = 1; i < n; ++i) {
    if (i != victim) {
      EXPECT_EQ(nodes[static_cast<size_t>(i)]->wait(60s), 1);
    }
  }
}

// Big bandwidth transfers so that the signal lands while the link moves data.
const std::vector<std::string> kSlowLinks = {"--bw-mib", "64", "--bw-rounds", "64"};

TEST_F(TptopoCluster, KilledPeerFailsItsLink) {
  auto nodes = startCluster(2, "kill", kSlowLinks, "2");
  peerCutOff(*this, 2, 1, SIGKILL, "SIGKILL", nodes);
}

TEST_F(TptopoCluster, StoppedPeerFailsItsLinksOnly) {
  auto nodes = startCluster(3, "stop", kSlowLinks, "2");
  peerCutOff(*this, 3, 2, SIGSTOP, "SIGSTOP", nodes);
}

}  // namespace
}  // namespace tpnode::tptopo
