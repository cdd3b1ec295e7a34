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

#include "tests/mesh/free_ports.h"
#include "tests/mesh/process.h"
#include "tests/support/http_client.h"
#include "tools/test_model.h"

namespace tpnode::node {
namespace {

using mesh::test::Process;
using namespace std::chrono_literals;

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

  std::unique_ptr<Process> start(int node, uint16_t port) {
    std::vector<std::string> a = {"--model",
                                  model_,
                                  "--liveness-timeout",
                                  "2",
                                  "--connect-timeout",
                                  "60",
                                  "--parallel",
                                  "2",
                                  "--ctx-size",
                                  "256",
                                  "--kv-block-size",
                                  "4",
                                  "--node-id",
                                  std::to_string(node),
                                  "--peers",
                                  peers_};
    if (GetParam() == "pp2") a.insert(a.end(), {"--pp", "2"});
    if (node == 0) a.insert(a.end(), {"--port", std::to_string(port)});
    return std::make_unique<Process>(
        a, std::vector<std::string>{mesh::test::testClusterSecretEnv()},
        testing::TempDir() + "/prefix_cache_serving_" + GetParam() + std::to_string(node) + ".log");
  }

  static bool awaitHealth(uint16_t port, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (test::httpRequest("127.0.0.1", port, "GET", "/health", "", 5).status == 200) return true;
      std::this_thread::sleep_for(100ms);
    }
    return false;
  }

  std::string model_;
  std::string peers_ = mesh::test::loopbackPeers(2);
};

TEST_P(PrefixCacheServingTest, ARepeatedPromptReusesItsPrefixAndGivesTheSameAnswer) {
  const uint16_t port = mesh::test::freePort();
  std::vector<std::unique_ptr<Process>> nodes;
  for (int n = 0; n < 2; ++n) nodes.push_back(start(n, port));
  ASSERT_TRUE(awaitHealth(port, 60s)) << nodes[0]->log();
  const std::string prompt = "a b ab ba b a ab ab ba a b b a ba ab a b ab ba b a ab";
  nlohmann::json body = {{"prompt", prompt},
                         {"max_tokens", 10},
                         {"temperature", 0},
                         {"ignore_eos", true},
                         {"logprobs", 1}};
  std::vector<nlohmann::json> answers;
  for (int i = 0; i < 2; ++i) {
    auto r = test::httpRequest("127.0.0.1", port, "POST", "/v1/completions", body.dump(), 30);
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
  EXPECT_EQ(warm["choices"][0]["text"], cold["choices"][0]["text"]);
  const auto& a = cold["choices"][0]["logprobs"]["token_logprobs"];
  const auto& b = warm["choices"][0]["logprobs"]["token_logprobs"];
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i].get<double>(), b[i].get<double>(), 1e-3) << "token " << i;
  }
  // Streamed, the final usage chunk carries the same cached_tokens.
  nlohmann::json streamed = body;
  streamed["stream"] = true;
  streamed["stream_options"] = {{"include_usage", true}};
  auto r = test::httpRequest("127.0.0.1", port, "POST", "/v1/completions", streamed.dump(), 30);
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
  auto metrics = test::httpRequest("127.0.0.1", port, "GET", "/metrics", "", 5);
  EXPECT_NE(metrics.body.find("tpnode_prefix_cache_hits_total 2"), std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("tpnode_kv_blocks_total 128"), std::string::npos);
  auto props = test::httpRequest("127.0.0.1", port, "GET", "/props", "", 5);
  EXPECT_EQ(nlohmann::json::parse(props.body)["kv_cache"]["blocks_total"], 128);
  nodes[0]->signal(SIGTERM);
  for (auto& n : nodes) EXPECT_EQ(n->wait(30s), 0) << n->log();
}

INSTANTIATE_TEST_SUITE_P(Layouts, PrefixCacheServingTest, testing::Values("tp2nodes", "pp2"),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace tpnode::node
