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

#include "tests/support/serving_cluster.h"
#include "tools/test_model.h"

namespace tpnode::node {
namespace {

using namespace std::chrono_literals;
using testing_support::ServingCluster;

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

  // `nodes` nodes (1: a single node, no pipeline) with `parallel` slots and `pp` stages (0: one
  // per node; -1: no --pp given), `extra` on every node; none is started yet.
  ServingCluster cluster(int nodes, const std::string& tag, int parallel = 2,
                         std::vector<std::string> extra = {}, int pp = 0) const {
    std::vector<std::string> a = {"--liveness-timeout", "2",
                                  "--connect-timeout",  "60",
                                  "--parallel",         std::to_string(parallel),
                                  "--ctx-size",         "512"};
    if (nodes > 1 && pp >= 0) a.insert(a.end(), {"--pp", std::to_string(pp > 0 ? pp : nodes)});
    a.insert(a.end(), extra.begin(), extra.end());
    return ServingCluster(
        {.model = model_, .nodes = nodes, .args = a, .tag = "pipeline_serving_" + tag});
  }

  static test::HttpResponse complete(const ServingCluster& c, const nlohmann::json& prompt,
                                     int max_tokens) {
    return c.complete(
        {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"ignore_eos", true}},
        60);
  }

  // A request for the logits of every prompt position (a logits tap): the rows, flattened.
  static std::vector<float> logitsTap(const ServingCluster& c, const std::string& prompt) {
    nlohmann::json body = {{"prompt", prompt},
                           {"max_tokens", 2},
                           {"temperature", 0},
                           {"taps", {{{"point", "logits"}}}}};
    auto r = c.complete(body, 60);
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
};

TEST_F(PipelineServingTest, ConcurrentRequestsGetTheTextOfOneNode) {
  const std::vector<std::string> prompts = {"a b", "ab ba", "b a b", "ba ab a", "a"};
  std::vector<std::string> expected;
  {
    ServingCluster one = cluster(1, "one");
    one.startAll();
    ASSERT_TRUE(one.awaitHealth(200, 60s)) << one.node(0).log();
    for (const std::string& p : prompts) {
      auto r = complete(one, p, 12);
      ASSERT_EQ(r.status, 200) << r.body;
      expected.push_back(text(r));
    }
    one.expectCleanShutdown();
  }
  ServingCluster c = cluster(3, "pp3");
  c.startAll();
  ASSERT_TRUE(c.awaitHealth(200, 60s)) << c.node(0).log();
  // 5 requests at once on 2 slots: batched decode steps, queued prompts joining running ones.
  std::vector<test::HttpResponse> answers(prompts.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i) {
    clients.emplace_back([&, i] { answers[i] = complete(c, prompts[i], 12); });
  }
  for (auto& t : clients) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(answers[i].status, 200) << answers[i].body;
    EXPECT_EQ(text(answers[i]), expected[i]) << prompts[i];
  }
  c.expectCleanShutdown();
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
    ServingCluster one = cluster(1, "inflight_one", 16);
    one.startAll();
    ASSERT_TRUE(one.awaitHealth(200, 60s)) << one.node(0).log();
    for (const auto& p : prompts) {
      auto r = complete(one, p, 12);
      ASSERT_EQ(r.status, 200) << r.body;
      expected.push_back(text(r));
    }
    auto r = complete(one, long_prompt, 8);
    ASSERT_EQ(r.status, 200) << r.body;
    expected_long = text(r);
    expected_tap = logitsTap(one, "ab ba a b");
    EXPECT_EQ(one.metric("tpnode_pipeline_overlapped_steps_total"), 0);
    one.expectCleanShutdown();
  }
  // 2 and 3 stages of one node, and 2 stages of two nodes (node 1, of stage 0, finishes each
  // step when node 0 does: kRetire).
  for (const auto& [n_nodes, stages] : std::vector<std::pair<int, int>>{{2, 2}, {3, 3}, {4, 2}}) {
    SCOPED_TRACE(fmt::format("{} nodes, {} stages", n_nodes, stages));
    ServingCluster c =
        cluster(n_nodes, fmt::format("inflight{}_{}", n_nodes, stages), 16, {}, stages);
    c.startAll();
    ASSERT_TRUE(c.awaitHealth(200, 60s)) << c.node(0).log();
    auto r = complete(c, long_prompt, 8);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(text(r), expected_long);
    EXPECT_GE(c.metric("tpnode_pipeline_overlapped_steps_total"), 1);
    std::vector<test::HttpResponse> answers(prompts.size());
    std::vector<std::thread> clients;
    for (size_t i = 0; i < prompts.size(); ++i) {
      clients.emplace_back([&, i] { answers[i] = complete(c, prompts[i], 12); });
    }
    std::vector<float> tap;  // a logits tap among them: its rows come from its own step
    clients.emplace_back([&] { tap = logitsTap(c, "ab ba a b"); });
    for (auto& t : clients) t.join();
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
    c.expectCleanShutdown();
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
    ServingCluster one = cluster(1, "prefix_one", 4, {"--prefix-cache", "off"});
    one.startAll();
    ASSERT_TRUE(one.awaitHealth(200, 60s)) << one.node(0).log();
    for (const auto& p : prompts) {
      auto r = complete(one, p, 24);
      ASSERT_EQ(r.status, 200) << r.body;
      expected.push_back(text(r));
    }
    one.expectCleanShutdown();
  }
  // 32 blocks of 16: one context of 512; 4 sequences of up to 152 positions need more.
  const std::vector<std::string> blocks = {"--kv-blocks", "32", "--prefix-cache", "on"};
  ServingCluster c = cluster(2, "prefix_pp2", 4, blocks);
  c.startAll();
  ASSERT_TRUE(c.awaitHealth(200, 60s)) << c.node(0).log();
  auto first = complete(c, prompts[0], 24);
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(text(first), expected[0]);
  std::vector<test::HttpResponse> answers(prompts.size());
  std::vector<std::thread> clients;
  for (size_t i = 1; i < prompts.size(); ++i) {
    clients.emplace_back([&, i] { answers[i] = complete(c, prompts[i], 24); });
  }
  for (auto& t : clients) t.join();
  for (size_t i = 1; i < prompts.size(); ++i) {
    ASSERT_EQ(answers[i].status, 200) << answers[i].body;
    EXPECT_EQ(text(answers[i]), expected[i]) << "request " << i;
  }
  EXPECT_GE(c.metric("tpnode_prefix_cache_hits_total"), 1);  // at least the second request
  EXPECT_GE(c.metric("tpnode_pipeline_overlapped_steps_total"), 1);
  c.expectCleanShutdown();
}

// The step watchdog with steps in flight: stage 1 (node 1) stalls at the first step while node
// 0 has already begun the second (a prompt of two chunks). Node 2 took up the first step and
// waits on node 1 for it, one command behind what node 0 sent it, but not behind what node 0
// waits on: node 1 alone is declared lost, the request gets 503, and serving resumes.
TEST_F(PipelineServingTest, AStalledStageIsBlamedAloneWithStepsInFlight) {
  ServingCluster c = cluster(3, "stall", 2, {"--step-timeout", "3"});
  c.start(0);
  c.start(1, {"TPNODE_TEST_STALL_AT_STEP=1"});
  c.start(2);
  ASSERT_TRUE(c.awaitHealth(200, 60s)) << c.node(0).log();
  std::vector<int> ids;
  for (int i = 0; i < 300; ++i) ids.push_back(3 + (i * 5) % 200);
  auto stalled = complete(c, ids, 4);
  EXPECT_EQ(stalled.status, 503) << stalled.body << "\n" << c.node(0).log();
  EXPECT_TRUE(c.node(0).waitForLog(
      "node 1 did not answer a step within --step-timeout 3.0 s: it took up 0 of the 1 step "
      "commands node 0 waits on (2 sent, 1 received)",
      5s))
      << c.node(0).log();
  ASSERT_TRUE(c.awaitHealth(200, 90s)) << c.node(0).log() << c.node(1).log();
  EXPECT_EQ(complete(c, "a b", 4).status, 200);
  c.node(0).signal(SIGTERM);
  for (int n = 0; n < 3; ++n) EXPECT_EQ(c.node(n).wait(30s), 0) << c.node(n).log();
  const std::string log0 = c.node(0).log();
  EXPECT_EQ(log0.find("node 2 did not answer a step"), std::string::npos) << log0;
  EXPECT_EQ(log0.find("cannot tell which node"), std::string::npos) << log0;
}

TEST_F(PipelineServingTest, ALostMiddleStageFailsTheRequestAndTheClusterReforms) {
  ServingCluster c = cluster(3, "fault");
  c.startAll();
  ASSERT_TRUE(c.awaitHealth(200, 60s)) << c.node(0).log();
  ASSERT_EQ(complete(c, "a b", 4).status, 200);
  // Stage 1 stops before the request goes out, so the request's first step waits on it; it is
  // killed inside the liveness timeout (2 s), while the request is in flight.
  c.node(1).signal(SIGSTOP);
  test::HttpResponse answer;
  std::thread client([&] { answer = complete(c, "a b", 400); });
  std::this_thread::sleep_for(500ms);
  c.node(1).signal(SIGKILL);
  client.join();
  EXPECT_EQ(answer.status, 503) << answer.body << "\n" << c.node(0).log();
  ASSERT_TRUE(c.awaitHealth(503, 10s)) << c.node(0).log();
  c.start(1, {}, "again");
  // Re-forming backs off (2 s doubling) while the node is away; a loaded machine is slow.
  ASSERT_TRUE(c.awaitHealth(200, 90s)) << c.logs();
  auto after = complete(c, "a b", 4);
  EXPECT_EQ(after.status, 200) << after.body;
  c.expectCleanShutdown();
}

// The fault path with steps in flight, 2 stages x --tp 2: four long requests keep steps of
// different sequences in the pipeline (counted as overlapped); stage 1 is stopped and then
// killed while they run. Every one of them fails with 503, the cluster re-forms when the node
// is restarted with the same command line, and it answers with the text it gave before.
TEST_F(PipelineServingTest, ALostStageWithStepsInFlightFailsEveryRequest) {
  ServingCluster c = cluster(2, "inflight_fault", 4, {"--tp", "2"});
  c.startAll();
  ASSERT_TRUE(c.awaitHealth(200, 60s)) << c.node(0).log();
  const test::HttpResponse before = complete(c, "a b", 4);
  ASSERT_EQ(before.status, 200) << before.body;
  std::vector<test::HttpResponse> answers(4);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < answers.size(); ++i) {
    clients.emplace_back([&, i] {
      answers[i] = complete(c, std::string(1, static_cast<char>('a' + i)) + " b", 400);
    });
  }
  // Steps in flight: node 0 began a step while another was in the pipeline.
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (c.metric("tpnode_pipeline_overlapped_steps_total") < 1 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  c.node(1).signal(SIGSTOP);
  std::this_thread::sleep_for(500ms);
  c.node(1).signal(SIGKILL);
  for (auto& t : clients) t.join();
  EXPECT_GE(c.metric("tpnode_pipeline_overlapped_steps_total"), 1);
  for (size_t i = 0; i < answers.size(); ++i) {
    EXPECT_EQ(answers[i].status, 503) << i << ": " << answers[i].body;
  }
  c.start(1, {}, "again");
  ASSERT_TRUE(c.awaitHealth(200, 90s)) << c.logs();
  const test::HttpResponse after = complete(c, "a b", 4);
  ASSERT_EQ(after.status, 200) << after.body;
  EXPECT_EQ(text(after), text(before));
  c.expectCleanShutdown();
}

// Rejoin under --split auto: node 0 chose the stages at startup. A worker killed and restarted
// with its original command line (no --pp) meets node 0's re-formation in the split probe, is
// sent the stages node 0 runs, and the cluster answers with the text it gave before.
TEST_F(PipelineServingTest, ARestartedWorkerAdoptsTheStagesSplitAutoChose) {
  ServingCluster c = cluster(2, "auto_rejoin", 2, {"--split", "auto"}, -1);
  c.startAll();
  ASSERT_TRUE(c.awaitHealth(200, 60s)) << c.logs();
  const test::HttpResponse before = complete(c, "a b", 4);
  ASSERT_EQ(before.status, 200) << before.body;
  c.node(1).signal(SIGKILL);
  EXPECT_EQ(c.node(1).wait(10s), 128 + SIGKILL);
  ASSERT_TRUE(c.awaitHealth(503, 10s)) << c.node(0).log();
  c.start(1, {}, "again");
  ASSERT_TRUE(c.awaitHealth(200, 90s)) << c.logs();
  EXPECT_TRUE(c.node(0).waitForLog("re-forming with the", 1s)) << c.node(0).log();
  EXPECT_TRUE(c.node(1).waitForLog("--split auto: node 0 chose", 1s)) << c.node(1).log();
  const test::HttpResponse after = complete(c, "a b", 4);
  ASSERT_EQ(after.status, 200) << after.body;
  EXPECT_EQ(text(after), text(before));
  c.expectCleanShutdown();
}

}  // namespace
}  // namespace tpnode::node
