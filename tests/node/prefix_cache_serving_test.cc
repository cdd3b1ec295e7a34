// Prefix reuse across processes, through the API: a 2-node cluster (tensor parallel) and a
// 2-stage pipeline on loopback answer a prompt, then the same prompt again; the second answer
// reuses the cached prefix (usage.prompt_tokens_details.cached_tokens, streamed too, /metrics)
// and has the same greedy text and token logprobs (within the Q8_0 tolerance) as the first,
// which computed everything. Label multiprocess.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/support/completion_checks.h"
#include "tests/support/serving_cluster.h"
#include "tools/test_model.h"

namespace tpnode::node {
namespace {

using namespace std::chrono_literals;
using testing_support::ServingCluster;

class PrefixCacheServingTest : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    tools::TestModelShape shape;
    shape.layers = 4;
    shape.type = model::TensorType::kQ8_0;
    model_ = testing::TempDir() + "/prefix_cache_serving_" + GetParam() + ".gguf";
    tools::writeTestModel(shape, model_);
  }
  void TearDown() override { std::filesystem::remove(model_); }

  std::string model_;
};

TEST_P(PrefixCacheServingTest, ARepeatedPromptReusesItsPrefixAndGivesTheSameAnswer) {
  std::vector<std::string> args = {"--liveness-timeout", "2", "--connect-timeout", "60",
                                   "--parallel",         "2", "--ctx-size",        "256",
                                   "--kv-block-size",    "4"};
  if (GetParam() == "pp2") args.insert(args.end(), {"--pp", "2"});
  ServingCluster c(
      {.model = model_, .nodes = 2, .args = args, .tag = "prefix_cache_serving_" + GetParam()});
  c.start(0);
  c.start(1);
  ASSERT_TRUE(c.awaitHealth(200, 60s)) << c.node(0).log();
  const std::string prompt = "a b ab ba b a ab ab ba a b b a ba ab a b ab ba b a ab";
  nlohmann::json body = {{"prompt", prompt},
                         {"max_tokens", 10},
                         {"temperature", 0},
                         {"ignore_eos", true},
                         {"logprobs", 1}};
  std::vector<nlohmann::json> answers;
  for (int i = 0; i < 2; ++i) {
    auto r = c.complete(body, 30);
    ASSERT_EQ(r.status, 200) << r.body;
    answers.push_back(nlohmann::json::parse(r.body));
  }
  const nlohmann::json& cold = answers[0];
  const nlohmann::json& warm = answers[1];
  const int prompt_tokens = cold["usage"]["prompt_tokens"];
  ASSERT_GT(prompt_tokens, 8);
  EXPECT_EQ(cold["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  // Whole blocks of 4, leaving at least the last prompt token to compute.
  EXPECT_EQ(warm["usage"]["prompt_tokens_details"]["cached_tokens"], (prompt_tokens - 1) / 4 * 4);
  testing_support::expectSameCompletion(cold, warm, 1e-3);
  // Streamed, the final usage chunk carries the same cached_tokens.
  nlohmann::json streamed = body;
  streamed["stream"] = true;
  streamed["stream_options"] = {{"include_usage", true}};
  auto r = c.complete(streamed, 30);
  ASSERT_EQ(r.status, 200) << r.body;
  nlohmann::json usage;
  for (size_t at = r.body.find("data: {"); at != std::string::npos;
       at = r.body.find("data: {", at + 1)) {
    const size_t end = r.body.find("\n\n", at);
    auto chunk = nlohmann::json::parse(r.body.substr(at + 6, end - at - 6));
    if (chunk.contains("usage") && !chunk["usage"].is_null()) usage = chunk["usage"];
  }
  ASSERT_FALSE(usage.is_null()) << r.body;
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], (prompt_tokens - 1) / 4 * 4);
  auto metrics = c.get("/metrics", 5);
  EXPECT_NE(metrics.body.find("tpnode_prefix_cache_hits_total 2"), std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("tpnode_kv_blocks_total 128"), std::string::npos);
  auto props = c.get("/props", 5);
  EXPECT_EQ(nlohmann::json::parse(props.body)["kv_cache"]["blocks_total"], 128);
  c.expectCleanShutdown();
}

INSTANTIATE_TEST_SUITE_P(Layouts, PrefixCacheServingTest, testing::Values("tp2nodes", "pp2"),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace tpnode::node
