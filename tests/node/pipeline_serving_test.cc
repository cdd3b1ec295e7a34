// A pipeline split serving the API, with real processes on loopback: 3 stages (one node each)
// on a generated 4-layer model answer concurrent requests (continuous batching, more requests
// than slots) with the text one node gives; a middle stage killed during a request fails it
// with 503, the cluster re-forms when the node is restarted, and serving resumes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "tests/mesh/free_ports.h"
#include "tests/mesh/process.h"
#include "tests/support/http_client.h"
#include "tools/test_model.h"

namespace tpnode::node {
namespace {

using mesh::test::Process;
using namespace std::chrono_literals;

class PipelineServingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tools::TestModelShape shape;
    shape.layers = 4;
    shape.type = model::TensorType::kQ8_0;
    // One file per test: ctest runs this binary's tests as concurrent processes, and each
    // removes its own file in TearDown.
    model_ = ::testing::TempDir() + "/pipeline_serving_q8_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".gguf";
    tools::writeTestModel(shape, model_);
  }
  void TearDown() override { std::filesystem::remove(model_); }

  // Node `node` of `nodes` (1: a single node, no pipeline), serving on `port` when node 0;
  // `pp` stages (0: one per node; -1: no --pp given).
  std::unique_ptr<Process> start(int node, int nodes, uint16_t port, const std::string& tag,
                                 int parallel = 2, const std::string& peers = "",
                                 std::vector<std::string> extra = {},
                                 std::vector<std::string> env = {}, int pp = 0) {
    std::vector<std::string> a = {
        "--model", model_,       "--liveness-timeout",     "2",          "--connect-timeout",
        "60",      "--parallel", std::to_string(parallel), "--ctx-size", "512"};
    if (nodes > 1) {
      a.insert(a.end(),
               {"--node-id", std::to_string(node), "--peers", peers.empty() ? peers_ : peers});
      if (pp >= 0) a.insert(a.end(), {"--pp", std::to_string(pp > 0 ? pp : nodes)});
    }
    if (node == 0) a.insert(a.end(), {"--port", std::to_string(port)});
    a.insert(a.end(), extra.begin(), extra.end());
    env.push_back(mesh::test::testClusterSecretEnv());
    return std::make_unique<Process>(a, env,
                                     ::testing::TempDir() + "/pipeline_serving_" + tag + ".log");
  }

  static test::HttpResponse complete(uint16_t port, const nlohmann::json& prompt, int max_tokens) {
    nlohmann::json body = {
        {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"ignore_eos", true}};
    return test::httpRequest("127.0.0.1", port, "POST", "/v1/completions", body.dump(), 60);
  }

  // A counter of node 0's /metrics (-1 when it is missing).
  static double metric(uint16_t port, const std::string& name) {
    const auto r = test::httpRequest("127.0.0.1", port, "GET", "/metrics", "", 10);
    for (size_t at = r.body.find(name); at != std::string::npos; at = r.body.find(name, at + 1)) {
      if ((at == 0 || r.body[at - 1] == '\n') && r.body[at + name.size()] == ' ') {
        return std::stod(r.body.substr(at + name.size() + 1));
      }
    }
    return -1;
  }

  static bool awaitHealth(uint16_t port, int status, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (test::httpRequest("127.0.0.1", port, "GET", "/health", "", 5).status == status) {
        return true;
      }
      std::this_thread::sleep_for(100ms);
    }
    return false;
  }

  // A request for the logits of every prompt position (a logits tap): the rows, flattened.
  static std::vector<float> logitsTap(uint16_t port, const std::string& prompt) {
    nlohmann::json body = {{"prompt", prompt},
                           {"max_tokens", 2},
                           {"temperature", 0},
                           {"taps", {{{"point", "logits"}}}}};
    auto r = test::httpRequest("127.0.0.1", port, "POST", "/v1/completions", body.dump(), 60);
    std::vector<float> flat;
    EXPECT_EQ(r.status, 200) << r.body.substr(0, 300);
    if (r.status != 200) return flat;
    const auto j = nlohmann::json::parse(r.body);
    EXPECT_TRUE(j.contains("taps") && j["taps"].size() == 1) << r.body.substr(0, 300);
    if (!j.contains("taps") || j["taps"].empty()) return flat;
    for (const auto& row : j["taps"][0]["data"]) {
      for (const auto& v : row) flat.push_back(v.get<float>());
    }
    return flat;
  }

  static std::string text(const test::HttpResponse& r) {
    return nlohmann::json::parse(r.body)["choices"][0]["text"].get<std::string>();
  }

  std::string model_;
  std::string peers_ = mesh::test::loopbackPeers(3);
};

TEST_F(PipelineServingTest, ConcurrentRequestsGetTheTextOfOneNode) {
  const std::vector<std::string> prompts = {"a b", "ab ba", "b a b", "ba ab a", "a"};
  std::vector<std::string> expected;
  {
    const uint16_t port = mesh::test::freePort();
    auto one = start(0, 1, port, "one");
    ASSERT_TRUE(awaitHealth(port, 200, 60s)) << one->log();
    for (const std::string& p : prompts) {
      auto r = complete(port, p, 12);
      ASSERT_EQ(r.status, 200) << r.body;
      expected.push_back(text(r));
    }
    one->signal(SIGTERM);
    EXPECT_EQ(one->wait(30s), 0) << one->log();
  }
  const uint16_t port = mesh::test::freePort();
  std::vector<std::unique_ptr<Process>> nodes;
  for (int n = 0; n < 3; ++n) nodes.push_back(start(n, 3, port, "pp3_" + std::to_string(n)));
  ASSERT_TRUE(awaitHealth(port, 200, 60s)) << nodes[0]->log();
  // 5 requests at once on 2 slots: batched decode steps, queued prompts joining running ones.
  std::vector<test::HttpResponse> answers(prompts.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i) {
    clients.emplace_back([&, i] { answers[i] = complete(port, prompts[i], 12); });
  }
  for (auto& c : clients) c.join();
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(answers[i].status, 200) << answers[i].body;
    EXPECT_EQ(text(answers[i]), expected[i]) << prompts[i];
  }
  nodes[0]->signal(SIGTERM);
  for (auto& n : nodes) EXPECT_EQ(n->wait(30s), 0) << n->log();
}

// Keeping the pipeline full: 16 concurrent requests (16 slots) through 2 and 3 stages (and 2
// stages of two nodes each), whose decodes node 0 spreads over one step per stage in flight,
// and a logits tap among them, get what one node gives. A prompt longer than a prefill chunk
// (256 tokens), alone, makes node 0 begin its second chunk while the first is still in the later
// stages: counted by tpnode_pipeline_overlapped_steps_total, which therefore must grow by at
// least one (no timing involved).
TEST_F(PipelineServingTest, StepsInFlightKeepTheTextOfOneNode) {
  std::vector<nlohmann::json> prompts;
  const std::vector<std::string> words = {"a", "b", "ab", "ba"};
  for (size_t i = 0; i < 16; ++i) {
    prompts.emplace_back(words[i % 4] + " " + words[(i / 4) % 4] + (i % 3 == 0 ? " a" : ""));
  }
  std::vector<int> long_ids;
  for (int i = 0; i < 300; ++i) long_ids.push_back(3 + (i * 7) % 200);
  const nlohmann::json long_prompt = long_ids;
  std::vector<std::string> expected;
  std::string expected_long;
  std::vector<float> expected_tap;
  {
    const uint16_t port = mesh::test::freePort();
    auto one = start(0, 1, port, "inflight_one", 16);
    ASSERT_TRUE(awaitHealth(port, 200, 60s)) << one->log();
    for (const auto& p : prompts) {
      auto r = complete(port, p, 12);
      ASSERT_EQ(r.status, 200) << r.body;
      expected.push_back(text(r));
    }
    auto r = complete(port, long_prompt, 8);
    ASSERT_EQ(r.status, 200) << r.body;
    expected_long = text(r);
    expected_tap = logitsTap(port, "ab ba a b");
    EXPECT_EQ(metric(port, "tpnode_pipeline_overlapped_steps_total"), 0);
    one->signal(SIGTERM);
    EXPECT_EQ(one->wait(30s), 0) << one->log();
  }
  // 2 and 3 stages of one node, and 2 stages of two nodes (node 1, of stage 0, finishes each
  // step when node 0 does: kRetire).
  for (const auto& [n_nodes, stages] : std::vector<std::pair<int, int>>{{2, 2}, {3, 3}, {4, 2}}) {
    SCOPED_TRACE(fmt::format("{} nodes, {} stages", n_nodes, stages));
    const uint16_t port = mesh::test::freePort();
    const std::string peers = mesh::test::loopbackPeers(n_nodes);
    std::vector<std::unique_ptr<Process>> nodes;
    for (int n = 0; n < n_nodes; ++n) {
      nodes.push_back(start(n, n_nodes, port, fmt::format("inflight{}_{}_{}", n_nodes, stages, n),
                            16, peers, {}, {}, stages));
    }
    ASSERT_TRUE(awaitHealth(port, 200, 60s)) << nodes[0]->log();
    auto r = complete(port, long_prompt, 8);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(text(r), expected_long);
    EXPECT_GE(metric(port, "tpnode_pipeline_overlapped_steps_total"), 1);
    std::vector<test::HttpResponse> answers(prompts.size());
    std::vector<std::thread> clients;
    for (size_t i = 0; i < prompts.size(); ++i) {
      clients.emplace_back([&, i] { answers[i] = complete(port, prompts[i], 12); });
    }
    std::vector<float> tap;  // a logits tap among them: its rows come from its own step
    clients.emplace_back([&] { tap = logitsTap(port, "ab ba a b"); });
    for (auto& c : clients) c.join();
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_EQ(answers[i].status, 200) << answers[i].body;
      EXPECT_EQ(text(answers[i]), expected[i]) << prompts[i];
    }
    ASSERT_EQ(tap.size(), expected_tap.size());
    ASSERT_FALSE(tap.empty());
    double diff = 0;
    for (size_t i = 0; i < tap.size(); ++i) {
      diff = std::max(diff, static_cast<double>(std::fabs(tap[i] - expected_tap[i])));
    }
    // One node per stage: the float operations of one node. Two: tp 2 inside each stage, whose
    // sums run in another order (tp_parity_test's tolerance for quantized weights).
    EXPECT_LE(diff, n_nodes == stages ? 1e-3 : 0.5) << "logits tap";
    nodes[0]->signal(SIGTERM);
    for (auto& n : nodes) EXPECT_EQ(n->wait(30s), 0) << n->log();
  }
}

// Prefix reuse with steps in flight: requests that share a 2-block prompt prefix, on 2 stages
// with 4 slots and few KV blocks (a decode then finds none free and preempts, or waits for a
// sequence whose step is in flight), give the text one node gives with the prefix cache off.
// The first request alone fills the prefix cache, so the others reuse it.
TEST_F(PipelineServingTest, PrefixReuseWithStepsInFlightKeepsTheTextOfOneNode) {
  std::vector<nlohmann::json> prompts;
  for (int r = 0; r < 8; ++r) {
    std::vector<int> ids;
    for (int i = 0; i < 32; ++i) ids.push_back(3 + (i * 7) % 200);  // shared: 2 blocks of 16
    for (int i = 0; i < 96; ++i) ids.push_back(3 + (i * 13 + r * 29) % 200);
    prompts.emplace_back(ids);
  }
  std::vector<std::string> expected;
  {
    const uint16_t port = mesh::test::freePort();
    auto one = start(0, 1, port, "prefix_one", 4, "", {"--prefix-cache", "off"});
    ASSERT_TRUE(awaitHealth(port, 200, 60s)) << one->log();
    for (const auto& p : prompts) {
      auto r = complete(port, p, 24);
      ASSERT_EQ(r.status, 200) << r.body;
      expected.push_back(text(r));
    }
    one->signal(SIGTERM);
    EXPECT_EQ(one->wait(30s), 0) << one->log();
  }
  const uint16_t port = mesh::test::freePort();
  const std::string peers = mesh::test::loopbackPeers(2);
  // 32 blocks of 16: one context of 512; 4 sequences of up to 152 positions need more.
  const std::vector<std::string> blocks = {"--kv-blocks", "32", "--prefix-cache", "on"};
  std::vector<std::unique_ptr<Process>> nodes;
  for (int n = 0; n < 2; ++n) {
    nodes.push_back(start(n, 2, port, fmt::format("prefix_pp2_{}", n), 4, peers, blocks));
  }
  ASSERT_TRUE(awaitHealth(port, 200, 60s)) << nodes[0]->log();
  auto first = complete(port, prompts[0], 24);
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(text(first), expected[0]);
  std::vector<test::HttpResponse> answers(prompts.size());
  std::vector<std::thread> clients;
  for (size_t i = 1; i < prompts.size(); ++i) {
    clients.emplace_back([&, i] { answers[i] = complete(port, prompts[i], 24); });
  }
  for (auto& c : clients) c.join();
  for (size_t i = 1; i < prompts.size(); ++i) {
    ASSERT_EQ(answers[i].status, 200) << answers[i].body;
    EXPECT_EQ(text(answers[i]), expected[i]) << "request " << i;
  }
  EXPECT_GE(metric(port, "tpnode_prefix_cache_hits_total"), 1);  // at least the second request
  EXPECT_GE(metric(port, "tpnode_pipeline_overlapped_steps_total"), 1);
  nodes[0]->signal(SIGTERM);
  for (auto& n : nodes) EXPECT_EQ(n->wait(30s), 0) << n->log();
}

// The step watchdog with steps in flight: stage 1 (node 1) stalls at the first step while node
// 0 has already begun the second (a prompt of two chunks). Node 2 took up the first step and
// waits on node 1 for it, one command behind what node 0 sent it, but not behind what node 0
// waits on: node 1 alone is declared lost, the request gets 503, and serving resumes.
TEST_F(PipelineServingTest, AStalledStageIsBlamedAloneWithStepsInFlight) {
  const uint16_t port = mesh::test::freePort();
  const std::vector<std::string> timeout = {"--step-timeout", "3"};
  std::vector<std::unique_ptr<Process>> nodes;
  nodes.push_back(start(0, 3, port, "stall_0", 2, "", timeout));
  nodes.push_back(start(1, 3, port, "stall_1", 2, "", timeout, {"TPNODE_TEST_STALL_AT_STEP=1"}));
  nodes.push_back(start(2, 3, port, "stall_2", 2, "", timeout));
  ASSERT_TRUE(awaitHealth(port, 200, 60s)) << nodes[0]->log();
  std::vector<int> ids;
  for (int i = 0; i < 300; ++i) ids.push_back(3 + (i * 5) % 200);
  auto stalled = complete(port, ids, 4);
  EXPECT_EQ(stalled.status, 503) << stalled.body << "\n" << nodes[0]->log();
  EXPECT_TRUE(nodes[0]->waitForLog(
      "node 1 did not answer a step within --step-timeout 3.0 s: it took up 0 of the 1 step "
      "commands node 0 waits on (2 sent, 1 received)",
      5s))
      << nodes[0]->log();
  ASSERT_TRUE(awaitHealth(port, 200, 90s)) << nodes[0]->log() << nodes[1]->log();
  EXPECT_EQ(complete(port, "a b", 4).status, 200);
  nodes[0]->signal(SIGTERM);
  for (auto& n : nodes) EXPECT_EQ(n->wait(30s), 0) << n->log();
  const std::string log0 = nodes[0]->log();
  EXPECT_EQ(log0.find("node 2 did not"), std::string::npos) << log0;
  EXPECT_EQ(log0.find("cannot tell which node"), std::string::npos) << log0;
}

TEST_F(PipelineServingTest, ALostMiddleStageFailsTheRequestAndTheClusterReforms) {
  const uint16_t port = mesh::test::freePort();
  std::vector<std::unique_ptr<Process>> nodes;
  for (int n = 0; n < 3; ++n) nodes.push_back(start(n, 3, port, "fault_" + std::to_string(n)));
  ASSERT_TRUE(awaitHealth(port, 200, 60s)) << nodes[0]->log();
  ASSERT_EQ(complete(port, "a b", 4).status, 200);
  // Stage 1 stops before the request goes out, so the request's first step waits on it; it is
  // killed inside the liveness timeout (2 s), while the request is in flight.
  nodes[1]->signal(SIGSTOP);
  test::HttpResponse answer;
  std::thread client([&] { answer = complete(port, "a b", 400); });
  std::this_thread::sleep_for(500ms);
  nodes[1]->signal(SIGKILL);
  client.join();
  EXPECT_EQ(answer.status, 503) << answer.body << "\n" << nodes[0]->log();
  ASSERT_TRUE(awaitHealth(port, 503, 10s)) << nodes[0]->log();
  nodes[1] = start(1, 3, port, "fault_1_again");
  // Re-forming backs off (2 s doubling) while the node is away; a loaded machine is slow.
  ASSERT_TRUE(awaitHealth(port, 200, 90s)) << nodes[0]->log() << "\n"
                                           << nodes[1]->log() << "\n"
                                           << nodes[2]->log();
  auto after = complete(port, "a b", 4);
  EXPECT_EQ(after.status, 200) << after.body;
  nodes[0]->signal(SIGTERM);
  EXPECT_EQ(nodes[0]->wait(30s), 0) << nodes[0]->log();
  EXPECT_EQ(nodes[1]->wait(30s), 0) << nodes[1]->log();
  EXPECT_EQ(nodes[2]->wait(30s), 0) << nodes[2]->log();
}

// The fault path with steps in flight, 2 stages x --tp 2: four long requests keep steps of
// different sequences in the pipeline (counted as overlapped); stage 1 is stopped and then
// killed while they run. Every one of them fails with 503, the cluster re-forms when the node
// is restarted with the same command line, and it answers with the text it gave before.
TEST_F(PipelineServingTest, ALostStageWithStepsInFlightFailsEveryRequest) {
  const uint16_t port = mesh::test::freePort();
  const std::string peers = mesh::test::loopbackPeers(2);
  const std::vector<std::string> tp = {"--tp", "2"};
  std::vector<std::unique_ptr<Process>> nodes;
  for (int n = 0; n < 2; ++n) {
    nodes.push_back(start(n, 2, port, "inflight_fault_" + std::to_string(n), 4, peers, tp));
  }
  ASSERT_TRUE(awaitHealth(port, 200, 60s)) << nodes[0]->log();
  const test::HttpResponse before = complete(port, "a b", 4);
  ASSERT_EQ(before.status, 200) << before.body;
  std::vector<test::HttpResponse> answers(4);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < answers.size(); ++i) {
    clients.emplace_back([&, i] {
      answers[i] = complete(port, std::string(1, static_cast<char>('a' + i)) + " b", 400);
    });
  }
  // Steps in flight: node 0 began a step while another was in the pipeline.
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (metric(port, "tpnode_pipeline_overlapped_steps_total") < 1 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  nodes[1]->signal(SIGSTOP);
  std::this_thread::sleep_for(500ms);
  nodes[1]->signal(SIGKILL);
  for (auto& c : clients) c.join();
  EXPECT_GE(metric(port, "tpnode_pipeline_overlapped_steps_total"), 1);
  for (size_t i = 0; i < answers.size(); ++i) {
    EXPECT_EQ(answers[i].status, 503) << i << ": " << answers[i].body;
  }
  nodes[1] = start(1, 2, port, "inflight_fault_1_again", 4, peers, tp);
  ASSERT_TRUE(awaitHealth(port, 200, 90s)) << nodes[0]->log() << "\n" << nodes[1]->log();
  const test::HttpResponse after = complete(port, "a b", 4);
  ASSERT_EQ(after.status, 200) << after.body;
  EXPECT_EQ(text(after), text(before));
  nodes[0]->signal(SIGTERM);
  for (auto& n : nodes) EXPECT_EQ(n->wait(30s), 0) << n->log();
}

// Rejoin under --split auto: node 0 chose the stages at startup. A worker killed and restarted
// with its original command line (no --pp) meets node 0's re-formation in the split probe, is
// sent the stages node 0 runs, and the cluster answers with the text it gave before.
TEST_F(PipelineServingTest, ARestartedWorkerAdoptsTheStagesSplitAutoChose) {
  const uint16_t port = mesh::test::freePort();
  const std::string peers = mesh::test::loopbackPeers(2);
  const std::vector<std::string> split = {"--split", "auto"};
  std::vector<std::unique_ptr<Process>> nodes;
  for (int n = 0; n < 2; ++n) {
    nodes.push_back(start(n, 2, port, "auto_rejoin_" + std::to_string(n), 2, peers, split, {}, -1));
  }
  ASSERT_TRUE(awaitHealth(port, 200, 60s)) << nodes[0]->log() << "\n" << nodes[1]->log();
  const test::HttpResponse before = complete(port, "a b", 4);
  ASSERT_EQ(before.status, 200) << before.body;
  nodes[1]->signal(SIGKILL);
  EXPECT_EQ(nodes[1]->wait(10s), 128 + SIGKILL);
  ASSERT_TRUE(awaitHealth(port, 503, 10s)) << nodes[0]->log();
  nodes[1] = start(1, 2, port, "auto_rejoin_1_again", 2, peers, split, {}, -1);
  ASSERT_TRUE(awaitHealth(port, 200, 90s)) << nodes[0]->log() << "\n" << nodes[1]->log();
  EXPECT_TRUE(nodes[0]->waitForLog("re-forming with the", 1s)) << nodes[0]->log();
  EXPECT_TRUE(nodes[1]->waitForLog("--split auto: node 0 chose", 1s)) << nodes[1]->log();
  const test::HttpResponse after = complete(port, "a b", 4);
  ASSERT_EQ(after.status, 200) << after.body;
  EXPECT_EQ(text(after), text(before));
  nodes[0]->signal(SIGTERM);
  for (auto& n : nodes) EXPECT_EQ(n->wait(30s), 0) << n->log();
}

}  // namespace
}  // namespace tpnode::node
