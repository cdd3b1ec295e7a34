// The Redis KV tier end to end (label redis): tpnode clusters of real processes on loopback and
// a real redis-server started by the test. Two separate clusters (their own ports and secrets)
// share one Redis (node 0's /metrics counts the blocks every rank stored, the worker's too): the
// second answers a long prompt that the first computed without prefilling
// its prefix (usage cached_tokens, the blocks fetched in /metrics) and with the same greedy
// tokens and logprobs; Redis killed mid-run turns into recomputation with every request
// answered; entries expire after --kv-cache-redis-ttl; a cluster with another layout or
// another model never uses the entries; a rank that misses its shards makes every rank
// recompute those blocks. The same under pipeline stages (--pp 2): every stage's rank stores and
// loads its own shard, and only a cluster with the same stage layers uses the entries.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/mesh/process.h"
#include "tests/node/redis/redis_server.h"
#include "tests/support/completion_checks.h"
#include "tests/support/serving_cluster.h"
#include "tools/test_model.h"

namespace tpnode::node {
namespace {

using mesh::test::Process;
using namespace std::chrono_literals;
using redis::test::RedisServer;

constexpr int kBlock = 4;

// A cluster of `nodes` processes with `tp` ranks each; its own ports and cluster secret. Node 0
// gets SIGTERM when it goes out of scope (tests/support/serving_cluster.h).
class Cluster {
 public:
  // `extra`: more arguments for every node (the split).
  Cluster(const std::string& model, int nodes, int tp, const std::string& redis_url,
          const std::string& tag, int ttl_s = 3600, const std::vector<std::string>& extra = {})
      : c_({.model = model,
            .nodes = nodes,
            .args = withExtra({"--liveness-timeout",
                               "2",
                               "--connect-timeout",
                               "60",
                               "--parallel",
                               "2",
                               "--ctx-size",
                               "256",
                               "--kv-block-size",
                               std::to_string(kBlock),
                               "--tp",
                               std::to_string(tp),
                               "--threads",
                               "1",
                               "--redis-timeout",
                               "0.5",
                               "--kv-cache-redis-url",
                               redis_url,
                               "--kv-cache-redis-ttl",
                               std::to_string(ttl_s)},
                              extra),
            .tag = "kv_tier_" + tag}) {
    c_.startAll();
  }

  bool awaitHealth() { return c_.awaitHealth(200, 90s); }
  std::string log() { return c_.logs(); }

  // A greedy completion; status and parsed body.
  std::pair<int, nlohmann::json> complete(const std::string& prompt) {
    nlohmann::json body = {{"prompt", prompt},
                           {"max_tokens", 6},
                           {"temperature", 0},
                           {"ignore_eos", true},
                           {"logprobs", 1}};
    auto r = c_.complete(body, 60);
    if (r.status != 200) return {r.status, nlohmann::json{{"error", r.body}}};
    return {r.status, nlohmann::json::parse(r.body)};
  }

  double metric(const std::string& name) { return c_.metric(name); }
  double metricSum(const std::string& name, const std::string& labels = "") {
    return c_.metricSum(name, labels);
  }
  // Waits until the cluster's ranks (those with `labels`) stored at least `n` block shards
  // (the writers are asynchronous; the workers' counts reach node 0 about once a second).
  bool awaitStored(double n, const std::string& labels = "") {
    auto deadline = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (metricSum("tpnode_kv_redis_blocks_stored_total", labels) >= n) return true;
      std::this_thread::sleep_for(100ms);
    }
    return false;
  }
  nlohmann::json props() { return nlohmann::json::parse(c_.get("/props", 5).body); }

 private:
  static std::vector<std::string> withExtra(std::vector<std::string> args,
                                            const std::vector<std::string>& extra) {
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  testing_support::ServingCluster c_;
};

// 60-odd tokens of the letters vocabulary.
const std::string kPrompt =
    "a b ab ba b a ab ab ba a b b a ba ab a b ab ba b a ab ba ab a b b a ab ba a b ab a ba b ab "
    "a b ba ab ab b a";

// Another prompt of about the same length, with no block in common with kPrompt.
const std::string kOtherPrompt =
    "ab ab b a ba ba a b ab b a ab ba a b ab a b ba ab b a ab ba b a ab a b ab ba a b a ab b ba "
    "a b ab a b ba";

int cachedTokens(const nlohmann::json& answer) {
  return answer["usage"]["prompt_tokens_details"]["cached_tokens"];
}

void expectSameAnswer(const nlohmann::json& a, const nlohmann::json& b) {
  testing_support::expectSameCompletion(a, b, 1e-3);
}

// The keys of global rank `rank` in the server (redis-cli --scan beside redis-server), or
// nullopt without redis-cli.
std::optional<std::vector<std::string>> rankKeys(const RedisServer& server, int rank) {
  const auto cli =
      std::filesystem::path(redis::test::redisServerBinary()).parent_path() / "redis-cli";
  if (!std::filesystem::exists(cli)) return std::nullopt;
  Process scan({"-p", std::to_string(server.port()), "--scan", "--pattern",
                "tpnode:kv:1:*:r" + std::to_string(rank) + ":*"},
               {}, server.dir() + "/scan.log", cli.string());
  if (scan.wait(10s) != 0) return std::nullopt;
  std::vector<std::string> keys;
  std::istringstream lines(scan.log());
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("tpnode:kv:1:", 0) == 0) keys.push_back(line);
  }
  return keys;
}

class KvTierServingTest : public testing::Test {
 protected:
  void SetUp() override {
    if (redis::test::redisServerBinary().empty()) GTEST_SKIP() << redis::test::kNoRedisReason;
    dir_ = mesh::test::makeTempDir("tpnode-kv-tier-");
    ASSERT_FALSE(dir_.empty());
    tools::TestModelShape shape;
    shape.layers = 2;
    shape.type = model::TensorType::kQ8_0;
    model_ = dir_ + "/model.gguf";
    tools::writeTestModel(shape, model_);
    // Another model: another file header (the model identity hashes the header and the size,
    // not the weights), with KV blocks of the same size.
    shape.seed = 2;
    shape.ffn = 512;
    other_model_ = dir_ + "/other.gguf";
    tools::writeTestModel(shape, other_model_);
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  std::string dir_, model_, other_model_;
};

TEST_F(KvTierServingTest, ASecondClusterLoadsThePrefixAndRedisDyingDegradesToRecomputing) {
  RedisServer server;
  ASSERT_TRUE(server.ok()) << server.why();
  nlohmann::json cold, warm;
  {
    Cluster a(model_, 2, 2, server.url(), "first");
    ASSERT_TRUE(a.awaitHealth()) << a.log();
    auto props = a.props();
    EXPECT_EQ(props["kv_cache"]["redis"]["ttl_s"], 3600) << props.dump();
    auto [status, answer] = a.complete(kPrompt);
    ASSERT_EQ(status, 200) << answer.dump();
    cold = answer;
    EXPECT_EQ(cachedTokens(cold), 0);
    const int prompt_tokens = cold["usage"]["prompt_tokens"];
    ASSERT_GT(prompt_tokens, 40);
    // Every full block of the prompt, on each of the 4 ranks: node 0's /metrics counts the
    // worker's ranks too (global ranks 2 and 3 on node 1).
    const int blocks = prompt_tokens / kBlock;
    ASSERT_TRUE(a.awaitStored(2.0 * blocks, "node=\"0\"")) << a.log();
    ASSERT_TRUE(a.awaitStored(2.0 * blocks, "node=\"1\"")) << a.log();
    EXPECT_GE(a.metricSum("tpnode_kv_redis_blocks_stored_total", "node=\"1\",rank=\"3\""), blocks);
    EXPECT_EQ(a.metricSum("tpnode_kv_redis_store_dropped_total"), 0);
  }
  const int prompt_tokens = cold["usage"]["prompt_tokens"];
  const int reusable = (prompt_tokens - 1) / kBlock * kBlock;  // the last token is computed
  Cluster b(model_, 2, 2, server.url(), "second");
  ASSERT_TRUE(b.awaitHealth()) << b.log();
  {
    auto [status, answer] = b.complete(kPrompt);
    ASSERT_EQ(status, 200) << answer.dump();
    warm = answer;
  }
  EXPECT_EQ(cachedTokens(warm), reusable) << b.log();
  expectSameAnswer(cold, warm);
  EXPECT_EQ(b.metric("tpnode_kv_redis_blocks_fetched_total"), reusable / kBlock);
  EXPECT_EQ(b.metric("tpnode_kv_redis_fetch_failures_total"), 0);
  EXPECT_EQ(b.metric("tpnode_prefix_cache_cached_tokens_total"), reusable);
  // Only the tokens after the prefix were prefilled.
  EXPECT_EQ(b.metric("tpnode_engine_prompt_tokens_total"), prompt_tokens - reusable);

  // Redis killed mid-run: every request is answered, recomputed where nothing is cached.
  server.kill();
  for (int i = 0; i < 3; ++i) {
    auto [status, answer] = b.complete("b a " + kPrompt + (i == 0 ? "" : " ab"));
    ASSERT_EQ(status, 200) << answer.dump() << b.log();
  }
  {
    auto [status, answer] = b.complete(kPrompt);  // its local prefix cache still serves it
    ASSERT_EQ(status, 200) << answer.dump();
    expectSameAnswer(cold, answer);
  }
  Cluster c(model_, 2, 2, server.url(), "third");  // starts with Redis down
  ASSERT_TRUE(c.awaitHealth()) << c.log();
  auto [status, answer] = c.complete(kPrompt);
  ASSERT_EQ(status, 200) << answer.dump() << c.log();
  EXPECT_EQ(cachedTokens(answer), 0);
  expectSameAnswer(cold, answer);
}

TEST_F(KvTierServingTest, EntriesExpireAfterTheTtl) {
  RedisServer server;
  ASSERT_TRUE(server.ok()) << server.why();
  nlohmann::json cold;
  {
    Cluster a(model_, 1, 2, server.url(), "ttl_first", /*ttl_s=*/1);
    ASSERT_TRUE(a.awaitHealth()) << a.log();
    auto [status, answer] = a.complete(kPrompt);
    ASSERT_EQ(status, 200) << answer.dump();
    cold = answer;
    const int prompt_tokens = cold["usage"]["prompt_tokens"];
    ASSERT_TRUE(a.awaitStored(2.0 * (prompt_tokens / kBlock))) << a.log();
  }
  std::this_thread::sleep_for(2500ms);  // past the 1 s TTL (Redis expires keys on access)
  Cluster b(model_, 1, 2, server.url(), "ttl_second", 1);
  ASSERT_TRUE(b.awaitHealth()) << b.log();
  auto [status, answer] = b.complete(kPrompt);
  ASSERT_EQ(status, 200) << answer.dump();
  EXPECT_EQ(cachedTokens(answer), 0);
  EXPECT_EQ(b.metric("tpnode_kv_redis_blocks_fetched_total"), 0);
  expectSameAnswer(cold, answer);
}

TEST_F(KvTierServingTest, AnotherLayoutOrModelNeverUsesTheEntries) {
  RedisServer server;
  ASSERT_TRUE(server.ok()) << server.why();
  {
    Cluster a(model_, 1, 2, server.url(), "scope_first");
    ASSERT_TRUE(a.awaitHealth()) << a.log();
    auto [status, answer] = a.complete(kPrompt);
    ASSERT_EQ(status, 200) << answer.dump();
    const int prompt_tokens = answer["usage"]["prompt_tokens"];
    ASSERT_TRUE(a.awaitStored(2.0 * (prompt_tokens / kBlock))) << a.log();
  }
  struct Other {
    std::string model;
    int tp;
    std::string tag;
  };
  for (const Other& o : {Other{model_, 1, "scope_tp1"}, Other{other_model_, 2, "scope_model"}}) {
    Cluster b(o.model, 1, o.tp, server.url(), o.tag);
    ASSERT_TRUE(b.awaitHealth()) << b.log();
    auto [status, answer] = b.complete(kPrompt);
    ASSERT_EQ(status, 200) << answer.dump();
    EXPECT_EQ(cachedTokens(answer), 0) << o.tag;
    EXPECT_EQ(b.metric("tpnode_kv_redis_blocks_fetched_total"), 0) << o.tag;
  }
  // The same model and layout does use them (the entries were there all along).
  Cluster c(model_, 1, 2, server.url(), "scope_same");
  ASSERT_TRUE(c.awaitHealth()) << c.log();
  auto [status, answer] = c.complete(kPrompt);
  ASSERT_EQ(status, 200) << answer.dump();
  EXPECT_GT(cachedTokens(answer), 0);
}

// All ranks of all nodes agree: when node 1's rank lost its shards (expired, evicted), node 0's
// rank, which still finds its own, recomputes the blocks too, and the answer is unchanged.
TEST_F(KvTierServingTest, ARankMissingItsShardsMakesTheWholeClusterRecompute) {
  RedisServer server;
  ASSERT_TRUE(server.ok()) << server.why();
  nlohmann::json cold;
  int blocks = 0;
  {
    Cluster a(model_, 2, 1, server.url(), "agree_first");
    ASSERT_TRUE(a.awaitHealth()) << a.log();
    auto [status, answer] = a.complete(kPrompt);
    ASSERT_EQ(status, 200) << answer.dump();
    cold = answer;
    blocks = cold["usage"]["prompt_tokens"].get<int>() / kBlock;
    ASSERT_TRUE(a.awaitStored(blocks)) << a.log();
  }
  // Node 1's rank (global rank 1) stores on its own: wait for its keys, then delete them.
  std::optional<std::vector<std::string>> keys;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while ((keys = rankKeys(server, 1)) && static_cast<int>(keys->size()) < blocks &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(100ms);
  }
  if (!keys) GTEST_SKIP() << "redis-cli is not installed beside redis-server";
  ASSERT_GE(static_cast<int>(keys->size()), blocks);
  redis::RedisClient client({server.endpoint()});
  for (const std::string& k : *keys) client.del(k);
  ASSERT_GE(static_cast<int>(rankKeys(server, 0)->size()), blocks);  // rank 0's are there

  Cluster b(model_, 2, 1, server.url(), "agree_second");
  ASSERT_TRUE(b.awaitHealth()) << b.log();
  auto [status, answer] = b.complete(kPrompt);
  ASSERT_EQ(status, 200) << answer.dump() << b.log();
  EXPECT_EQ(cachedTokens(answer), 0);
  expectSameAnswer(cold, answer);
  EXPECT_EQ(b.metric("tpnode_kv_redis_blocks_fetched_total"), 0);
  const int asked = (cold["usage"]["prompt_tokens"].get<int>() - 1) / kBlock;
  EXPECT_EQ(b.metric("tpnode_kv_redis_fetch_failures_total"), asked);
}

// Pipeline stages (--pp 2 on 2 nodes of 1 rank: global rank 0 on node 0 holds layers 0-1,
// rank 1 on node 1 layers 2-3; each stores its own shard): a second cluster with the same split
// loads the prefix with the same answer, also while another request's steps are in flight, and
// so does one whose --split auto chose those stages; clusters with other stage layers or without
// stages never use the entries; a stage whose rank misses its shards makes every stage
// recompute.
TEST_F(KvTierServingTest, PipelineStagesShareTheTierWithTheSameSplitOnly) {
  RedisServer server;
  ASSERT_TRUE(server.ok()) << server.why();
  tools::TestModelShape shape;
  shape.layers = 4;
  shape.type = model::TensorType::kQ8_0;
  const std::string model = dir_ + "/four_layers.gguf";
  tools::writeTestModel(shape, model);
  const std::vector<std::string> split = {"--pp", "2", "--pp-layers", "0-1,2-3"};
  nlohmann::json cold, other_cold;
  int prompt_tokens = 0;
  {
    Cluster a(model, 2, 1, server.url(), "pp_first", 3600, split);
    ASSERT_TRUE(a.awaitHealth()) << a.log();
    auto [status, answer] = a.complete(kPrompt);
    ASSERT_EQ(status, 200) << answer.dump();
    cold = answer;
    EXPECT_EQ(cachedTokens(cold), 0);
    prompt_tokens = cold["usage"]["prompt_tokens"];
    ASSERT_GT(prompt_tokens, 40);
    auto [other_status, other] = a.complete(kOtherPrompt);
    ASSERT_EQ(other_status, 200) << other.dump();
    other_cold = other;
    // Every full block of both prompts, by each stage's rank, counted on node 0's /metrics.
    const int blocks = prompt_tokens / kBlock + other["usage"]["prompt_tokens"].get<int>() / kBlock;
    ASSERT_TRUE(a.awaitStored(blocks, "node=\"0\",rank=\"0\"")) << a.log();
    ASSERT_TRUE(a.awaitStored(blocks, "node=\"1\",rank=\"1\"")) << a.log();
    EXPECT_EQ(a.metricSum("tpnode_kv_redis_store_dropped_total"), 0);
  }
  const int reusable = (prompt_tokens - 1) / kBlock * kBlock;
  {
    Cluster b(model, 2, 1, server.url(), "pp_second", 3600, split);
    ASSERT_TRUE(b.awaitHealth()) << b.log();
    auto [status, warm] = b.complete(kPrompt);
    ASSERT_EQ(status, 200) << warm.dump();
    EXPECT_EQ(cachedTokens(warm), reusable) << b.log();
    expectSameAnswer(cold, warm);
    EXPECT_EQ(b.metric("tpnode_kv_redis_blocks_fetched_total"), reusable / kBlock);
    EXPECT_EQ(b.metric("tpnode_kv_redis_fetch_failures_total"), 0);
    EXPECT_EQ(b.metric("tpnode_engine_prompt_tokens_total"), prompt_tokens - reusable);
    // The other prompt loads while a request that nothing cached runs beside it: the answers
    // do not depend on how their steps interleave.
    auto busy = std::async(std::launch::async, [&] { return b.complete("b a b " + kPrompt); });
    auto [other_status, other] = b.complete(kOtherPrompt);
    ASSERT_EQ(other_status, 200) << other.dump();
    const int other_tokens = other_cold["usage"]["prompt_tokens"];
    EXPECT_EQ(cachedTokens(other), (other_tokens - 1) / kBlock * kBlock) << b.log();
    expectSameAnswer(other_cold, other);
    EXPECT_EQ(busy.get().first, 200);
    EXPECT_EQ(b.metric("tpnode_kv_redis_fetch_failures_total"), 0);
  }
  // --split auto choosing the same stages (rank figures that make stages win, as in
  // split_auto_serving_test; the balanced plan of 4 like layers is 0-1,2-3): its worker learns
  // the stages from node 0 and uses the same keys, so the cluster loads the prefix.
  {
    Cluster s(model, 2, 1, server.url(), "pp_auto", 3600,
              {"--split", "auto", "--split-rank-read", "1e6", "--split-rank-macs", "1e9"});
    ASSERT_TRUE(s.awaitHealth()) << s.log();
    auto [status, answer] = s.complete(kPrompt);
    ASSERT_EQ(status, 200) << answer.dump();
    EXPECT_EQ(cachedTokens(answer), reusable) << s.log();
    expectSameAnswer(cold, answer);
    EXPECT_EQ(s.metric("tpnode_kv_redis_blocks_fetched_total"), reusable / kBlock);
  }
  // Other stage layers, and the same nodes without stages (tensor parallel over both).
  for (const auto& [tag, args] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"pp_other_layers", {"--pp", "2", "--pp-layers", "0-0,1-3"}}, {"pp_none", {}}}) {
    Cluster c(model, 2, 1, server.url(), tag, 3600, args);
    ASSERT_TRUE(c.awaitHealth()) << c.log();
    auto [status, answer] = c.complete(kPrompt);
    ASSERT_EQ(status, 200) << answer.dump();
    EXPECT_EQ(cachedTokens(answer), 0) << tag;
    EXPECT_EQ(c.metric("tpnode_kv_redis_blocks_fetched_total"), 0) << tag;
    // Not even asked for: its lookup finds none of its own keys.
    EXPECT_EQ(c.metric("tpnode_kv_redis_fetch_failures_total"), 0) << tag;
  }
  // Stage 1's rank loses its shards: stage 0's rank still finds its own, and recomputes too.
  std::optional<std::vector<std::string>> keys = rankKeys(server, 1);
  if (!keys) GTEST_SKIP() << "redis-cli is not installed beside redis-server";
  ASSERT_GE(static_cast<int>(keys->size()), prompt_tokens / kBlock);
  redis::RedisClient client({server.endpoint()});
  for (const std::string& k : *keys) client.del(k);
  Cluster e(model, 2, 1, server.url(), "pp_stage_missing", 3600, split);
  ASSERT_TRUE(e.awaitHealth()) << e.log();
  auto [status, answer] = e.complete(kPrompt);
  ASSERT_EQ(status, 200) << answer.dump() << e.log();
  EXPECT_EQ(cachedTokens(answer), 0);
  expectSameAnswer(cold, answer);
  EXPECT_EQ(e.metric("tpnode_kv_redis_blocks_fetched_total"), 0);
  EXPECT_EQ(e.metric("tpnode_kv_redis_fetch_failures_total"), (prompt_tokens - 1) / kBlock);
}

}  // namespace
}  // namespace tpnode::node
