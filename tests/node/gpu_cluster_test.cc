// Real tpnode processes with GPU ranks (label gpu): every nodes x local-ranks layout (and
// pipeline stages of GPU ranks, --pp 2), all ranks
// on CUDA device 0 (--devices 0,0 puts two local ranks on one GPU; two processes share it too),
// must produce llama.cpp's greedy tokens on the F32 reference models (GPU ranks match
// llama.cpp within 5e-5 per logits row there, so the greedy ids are equal). This exercises the
// hierarchical path of GPU ranks: local device all-reduce, host staging, the TCP mesh. On
// several nodes `--inter-transport` is auto: both processes share device 0, so NCCL across
// nodes refuses (duplicate GPUs) and every node falls back to the mesh and says so; forced
// nccl must then fail at startup naming the flag. NCCL's bootstrap sockets stay on loopback
// (NCCL_SOCKET_IFNAME=lo).
// Also prefix reuse through the API on GPU ranks (GpuServingTest), and the Redis KV tier of GPU
// ranks: two clusters share a prefix through one redis-server that the test starts (the GPU
// bundle carries Debian's, tools/gpu-check.sh; skipped with the reason where there is none).
// Skipped with "skipped: no CUDA device" where there is none.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/mesh/free_ports.h"
#include "tests/mesh/process.h"
#include "tests/model/reference_data.h"
#include "tests/node/redis/redis_server.h"
#include "tests/support/completion_checks.h"
#include "tests/support/cuda_device.h"
#include "tests/support/read_file.h"
#include "tests/support/serving_cluster.h"

namespace tpnode::node {
namespace {

using mesh::test::Process;
using namespace std::chrono_literals;

using testing_support::readFile;

struct Case {
  std::string model, prompt;
  int nodes, tp;
  std::string transport;  // --local-transport
  int pp = 1;             // --pp: pipeline stages (nodes / pp nodes per stage)
};

// The environment of every tpnode process here: NCCL bootstraps over loopback only.
const std::vector<std::string> kEnv = {"NCCL_SOCKET_IFNAME=lo", mesh::test::testClusterSecretEnv()};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.model << "/" << c.prompt << " " << c.nodes << "x" << c.tp << " " << c.transport << " pp"
      << c.pp;
}

class GpuClusterTest : public ::testing::TestWithParam<Case> {};

TEST_P(GpuClusterTest, GreedyTokensMatchLlamaCpp) {
  TP_SKIP_WITHOUT_CUDA_DEVICE();
  const Case& c = GetParam();
  const std::string ref = testing_support::referenceDataDir() + "/";
  auto expected =
      nlohmann::json::parse(readFile(ref + "cases/" + c.model + "__" + c.prompt + ".json"));
  const std::string peers = mesh::test::loopbackPeers(c.nodes);
  std::string devices;
  for (int r = 0; r < c.tp; ++r) devices += r ? ",0" : "0";
  std::vector<std::unique_ptr<Process>> procs;
  for (int n = c.nodes - 1; n >= 0; --n) {
    std::vector<std::string> a = {"--model",
                                  testing_support::referenceModel(c.model),
                                  "--node-id",
                                  std::to_string(n),
                                  "--peers",
                                  peers,
                                  "--tp",
                                  std::to_string(c.tp),
                                  "--backend",
                                  "cuda",
                                  "--devices",
                                  devices,
                                  "--local-transport",
                                  c.transport,
                                  "--connect-timeout",
                                  "30",
                                  "--log-level",
                                  "info"};
    if (c.pp > 1) {
      a.push_back("--pp");
      a.push_back(std::to_string(c.pp));
    }
    if (n == 0) {
      for (const std::string& s :
           {std::string("--prompt"), readFile(ref + "prompts/" + c.prompt + ".txt"),
            std::string("-n"), std::string("32"), std::string("--json")}) {
        a.push_back(s);
      }
    }
    procs.push_back(
        std::make_unique<Process>(a, kEnv,
                                  ::testing::TempDir() + "/gpu_cluster_" + std::to_string(c.nodes) +
                                      "x" + std::to_string(c.tp) + "_" + c.transport + "_pp" +
                                      std::to_string(c.pp) + "_n" + std::to_string(n) + ".log"));
  }
  std::reverse(procs.begin(), procs.end());
  std::vector<int> rc;
  for (auto& p : procs) rc.push_back(p->wait(120s));
  for (size_t n = 0; n < procs.size(); ++n) {
    ASSERT_EQ(rc[n], 0) << "node " << n << " log:\n" << procs[n]->log();
  }
  const std::string log0 = procs[0]->log();
  EXPECT_NE(log0.find("on cuda:0"), std::string::npos) << "the ranks did not run on the GPU:\n"
                                                       << log0;
  if (c.nodes / c.pp > 1) {
    // The nodes of a stage are on device 0: NCCL across nodes is refused, the mesh is used.
    EXPECT_NE(log0.find("inter-node: nccl not used: "), std::string::npos) << log0;
    EXPECT_NE(log0.find("inter-node: mesh"), std::string::npos) << log0;
  }
  nlohmann::json out;
  std::istringstream lines(log0);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line[0] == '{') out = nlohmann::json::parse(line);
  }
  ASSERT_TRUE(out.is_object()) << log0;
  EXPECT_EQ(out["prompt_ids"], expected["prompt_ids"]);
  EXPECT_EQ(out["ids"], expected["generated_ids"]) << log0;
}

// --inter-transport nccl with both nodes on device 0: NCCL refuses duplicate GPUs, so every
// node fails at startup (nonzero exit) with a message naming the flag and the fix.
TEST(GpuClusterInterTest, ForcedNcclFailsAtStartupNamingTheFlag) {
  TP_SKIP_WITHOUT_CUDA_DEVICE();
  const std::string model = testing_support::referenceModel("llama-tiny-f32");
  const std::string peers = mesh::test::loopbackPeers(2);
  std::vector<std::unique_ptr<Process>> procs;
  for (int n = 1; n >= 0; --n) {
    std::vector<std::string> a = {"--model",
                                  model,
                                  "--node-id",
                                  std::to_string(n),
                                  "--peers",
                                  peers,
                                  "--tp",
                                  "1",
                                  "--backend",
                                  "cuda",
                                  "--devices",
                                  "0",
                                  "--inter-transport",
                                  "nccl",
                                  "--connect-timeout",
                                  "30",
                                  "--log-level",
                                  "info"};
    if (n == 0) {
      for (const char* x : {"--prompt", "Hello", "-n", "4"}) a.emplace_back(x);
    }
    procs.push_back(std::make_unique<Process>(
        a, kEnv, ::testing::TempDir() + "/gpu_cluster_inter_nccl_n" + std::to_string(n) + ".log"));
  }
  std::reverse(procs.begin(), procs.end());
  const int rc0 = procs[0]->wait(120s);
  const int rc1 = procs[1]->wait(120s);
  const std::string log0 = procs[0]->log();
  // A refusal, not a hang (-1: killed at the deadline) nor a crash (128 + signal).
  EXPECT_TRUE(rc0 > 0 && rc0 < 128) << rc0 << "\n" << log0;
  EXPECT_TRUE(rc1 > 0 && rc1 < 128) << rc1 << "\n" << procs[1]->log();
  EXPECT_NE(log0.find("--inter-transport nccl"), std::string::npos) << log0;
  EXPECT_NE(log0.find("--inter-transport mesh"), std::string::npos) << log0;
}

// Prefix reuse with GPU ranks (their paged KV cache): a 2-node cluster of GPU ranks serving
// llama-tiny-f32 answers a prompt, then the same prompt again; the second answer reuses whole
// blocks of the prompt (usage.prompt_tokens_details.cached_tokens) and gives the same greedy
// text and token logprobs (F32 model: the same f32 rows either way, within 1e-4).
TEST(GpuServingTest, ARepeatedPromptReusesItsPrefixOnGpuRanks) {
  TP_SKIP_WITHOUT_CUDA_DEVICE();
  testing_support::ServingCluster c(
      {.model = testing_support::referenceModel("llama-tiny-f32"),
       .nodes = 2,
       .args = {"--backend", "cuda", "--devices", "0", "--parallel", "2", "--ctx-size", "256",
                "--kv-block-size", "4", "--connect-timeout", "60"},
       .tag = "gpu_prefix_serving"});
  c.startAll(kEnv);
  ASSERT_TRUE(c.awaitHealth(200, 120s)) << c.node(0).log();
  const nlohmann::json body = {
      {"prompt", "The quick brown fox jumps over the lazy dog while the cat sleeps on the mat"},
      {"max_tokens", 8},
      {"temperature", 0},
      {"ignore_eos", true},
      {"logprobs", 1}};
  std::vector<nlohmann::json> answers;
  for (int i = 0; i < 2; ++i) {
    auto r = c.complete(body, 60);
    ASSERT_EQ(r.status, 200) << r.body;
    answers.push_back(nlohmann::json::parse(r.body));
  }
  const int prompt_tokens = answers[0]["usage"]["prompt_tokens"];
  ASSERT_GT(prompt_tokens, 8);
  EXPECT_EQ(answers[0]["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(answers[1]["usage"]["prompt_tokens_details"]["cached_tokens"],
            (prompt_tokens - 1) / 4 * 4);
  EXPECT_EQ(answers[1]["choices"][0]["text"], answers[0]["choices"][0]["text"]);
  const auto& a = answers[0]["choices"][0]["logprobs"]["token_logprobs"];
  const auto& b = answers[1]["choices"][0]["logprobs"]["token_logprobs"];
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i].get<double>(), b[i].get<double>(), 1e-4) << "token " << i;
  }
  c.expectCleanShutdown();
}

// The Redis KV tier with GPU ranks: cluster A (2 nodes of GPU ranks, with --pp 2 in the second
// case) answers a prompt, nothing cached anywhere, and its ranks store the prompt's blocks (each
// its own shard) in one redis-server; cluster B, another cluster with its own ports and secret
// and the same layout, fetches them (its /metrics count the blocks fetched, and only the rest of
// the prompt is prefilled) and gives A's greedy text and token logprobs (F32 model: within 1e-4).
class GpuKvTierTest : public ::testing::TestWithParam<int> {};  // the pipeline stages

TEST_P(GpuKvTierTest, ASecondGpuClusterFetchesThePrefixFromRedis) {
  TP_SKIP_WITHOUT_CUDA_DEVICE();
  if (redis::test::redisServerBinary().empty()) GTEST_SKIP() << redis::test::kNoRedisReason;
  redis::test::RedisServer server;
  ASSERT_TRUE(server.ok()) << server.why();
  constexpr int kBlock = 4;
  const int pp = GetParam();
  auto spec = [&](const std::string& tag) {
    testing_support::ServingSpec s{
        .model = testing_support::referenceModel("llama-tiny-f32"),
        .nodes = 2,
        .args = {"--backend", "cuda", "--devices", "0", "--parallel", "2", "--ctx-size", "256",
                 "--kv-block-size", std::to_string(kBlock), "--connect-timeout", "60",
                 "--redis-timeout", "2", "--kv-cache-redis-url", server.url()},
        .tag = "gpu_kv_tier_pp" + std::to_string(pp) + "_" + tag};
    if (pp > 1) s.args.insert(s.args.end(), {"--pp", std::to_string(pp)});
    return s;
  };
  const nlohmann::json body = {
      {"prompt",
       "The quick brown fox jumps over the lazy dog while the cat sleeps on the mat, and the "
       "old farmer walks slowly down the long road towards the quiet village by the river"},
      {"max_tokens", 8},
      {"temperature", 0},
      {"ignore_eos", true},
      {"logprobs", 1}};
  nlohmann::json cold, warm;
  {
    testing_support::ServingCluster a(spec("first"));
    a.startAll(kEnv);
    ASSERT_TRUE(a.awaitHealth(200, 120s)) << a.logs();
    auto r = a.complete(body, 60);
    ASSERT_EQ(r.status, 200) << r.body << a.logs();
    cold = nlohmann::json::parse(r.body);
    EXPECT_EQ(cold["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    EXPECT_EQ(a.metric("tpnode_kv_redis_blocks_fetched_total"), 0);
    // Every full block of the prompt on each rank (the writers are asynchronous; the worker's
    // counts reach node 0 about once a second).
    const int blocks = cold["usage"]["prompt_tokens"].get<int>() / kBlock;
    for (const char* node : {"node=\"0\"", "node=\"1\""}) {
      const auto deadline = std::chrono::steady_clock::now() + 30s;
      while (a.metricSum("tpnode_kv_redis_blocks_stored_total", node) < blocks &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(100ms);
      }
      ASSERT_GE(a.metricSum("tpnode_kv_redis_blocks_stored_total", node), blocks)
          << node << "\n"
          << a.get("/metrics").body << a.logs();
    }
    a.expectCleanShutdown();
  }
  const int prompt_tokens = cold["usage"]["prompt_tokens"];
  ASSERT_GT(prompt_tokens, 6 * kBlock);
  const int reusable = (prompt_tokens - 1) / kBlock * kBlock;  // the last token is computed
  testing_support::ServingCluster b(spec("second"));
  b.startAll(kEnv);
  ASSERT_TRUE(b.awaitHealth(200, 120s)) << b.logs();
  auto r = b.complete(body, 60);
  ASSERT_EQ(r.status, 200) << r.body << b.logs();
  warm = nlohmann::json::parse(r.body);
  EXPECT_EQ(warm["usage"]["prompt_tokens_details"]["cached_tokens"], reusable) << b.logs();
  EXPECT_EQ(b.metric("tpnode_kv_redis_blocks_fetched_total"), reusable / kBlock) << b.logs();
  EXPECT_EQ(b.metric("tpnode_kv_redis_fetch_failures_total"), 0);
  EXPECT_EQ(b.metric("tpnode_engine_prompt_tokens_total"), prompt_tokens - reusable);
  testing_support::expectSameCompletion(cold, warm, 1e-4);
  b.expectCleanShutdown();
}

INSTANTIATE_TEST_SUITE_P(Stages, GpuKvTierTest, ::testing::Values(1, 2),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "pp" + std::to_string(i.param);
                         });

INSTANTIATE_TEST_SUITE_P(Layouts, GpuClusterTest,
                         ::testing::Values(Case{"llama-tiny-f32", "en_sentence", 1, 1, "auto"},
                                           Case{"llama-tiny-f32", "en_sentence", 1, 2, "p2p"},
                                           Case{"llama-tiny-f32", "en_sentence", 1, 2, "host"},
                                           Case{"llama-tiny-f32", "paragraph", 2, 1, "auto"},
                                           Case{"qwen2-tiny-f32", "en_sentence", 2, 2, "p2p"},
                                           Case{"llama-tiny-kv1-f32", "paragraph", 2, 2, "host"},
                                           // Pipeline stages of GPU ranks: 2 stages of one
                                           // node, and 2 stages x 2 nodes x 2 ranks.
                                           Case{"llama-tiny-f32", "paragraph", 2, 1, "auto", 2},
                                           Case{"qwen2-tiny-f32", "en_sentence", 4, 2, "p2p", 2}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           std::string s = i.param.model + "_" + i.param.prompt + "_" +
                                           std::to_string(i.param.nodes) + "x" +
                                           std::to_string(i.param.tp) + "_" + i.param.transport +
                                           (i.param.pp > 1 ? "_pp" + std::to_string(i.param.pp)
                                                           : std::string());
                           for (char& ch : s) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return s;
                         });

}  // namespace
}  // namespace tpnode::node
