// RankKvTier over a real redis-server: a block's shard copied out of one KvCache comes back
// into another exactly; a value under the right key with a header that matches but a payload
// of another size is refused (hostile bytes), as are missing keys; a full writer queue drops
// blocks with a count instead of growing; Redis silent or down answers "not loaded" without
// throwing.
#include "node/kv_tier_rank.h"

#include <gtest/gtest.h>

#include <thread>

#include "tests/node/redis/redis_server.h"

namespace tpnode::node {
namespace {

using namespace std::chrono_literals;
using redis::test::RedisServer;

constexpr int64_t kLayers = 2, kHeads = 2, kHeadDim = 8, kBlockSize = 4, kBlocks = 8;

model::KvCache cache() {
  return model::KvCache(kLayers, 1, 16, kHeads, kHeadDim, 0, kBlockSize, kBlocks);
}

void fill(model::KvCache& c, int64_t block, float seed) {
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int64_t o = 0; o < kBlockSize; ++o) {
      for (int64_t i = 0; i < c.rowFloats(); ++i) {
        c.k(l, block, o)[i] = seed + static_cast<float>(l * 1000 + o * 100 + i);
        c.v(l, block, o)[i] = -seed - static_cast<float>(l * 1000 + o * 100 + i);
      }
    }
  }
}

std::vector<float> exported(const model::KvCache& c, int64_t block) {
  std::vector<float> out(c.blockFloats());
  c.exportBlock(block, out);
  return out;
}

class RankKvTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (redis::test::redisServerBinary().empty()) GTEST_SKIP() << redis::test::kNoRedisReason;
    server_ = std::make_unique<RedisServer>();
    ASSERT_TRUE(server_->ok()) << server_->why();
    options_.store.endpoint = server_->endpoint();
    options_.store.timeout = 500ms;
    options_.scope.model_identity = "name=tiny;arch=llama;bytes=1;header_sha256=00";
    options_.scope.layout = collectives::Layout(std::vector<int>{2});
    options_.scope.block_tokens = kBlockSize;
    options_.scope.cache_format = kKvTierFormat;
  }
  static bool awaitStored(const RankKvTier& tier, uint64_t n) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (tier.counters().stored < n && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(10ms);
    }
    return tier.counters().stored >= n;
  }
  std::unique_ptr<RedisServer> server_;
  KvTierOptions options_;
};

TEST_F(RankKvTierTest, BlocksRoundTripAndBadValuesAreNotLoaded) {
  model::KvCache a = cache();
  fill(a, 1, 3.0f);
  fill(a, 2, 7.0f);
  RankKvTier writer(options_, /*global_rank=*/1, a.blockFloats());
  const KvTierBlock stored[] = {{0x11, 1}, {0x22, 2}};
  writer.store(a, stored);
  fill(a, 1, 99.0f);  // reused at once: the stored bytes were copied out before
  ASSERT_TRUE(awaitStored(writer, 2));

  // Another process with the same scope and rank loads them into other block ids.
  model::KvCache b = cache();
  RankKvTier reader(options_, 1, b.blockFloats());
  // A value under a key of this rank and scope whose header matches but whose payload is not
  // one block: refused.
  redis::RedisClient client({server_->endpoint()});
  const std::vector<uint8_t> short_payload(16, 1);
  client.set(redis::kvBlockKey(options_.scope, 1, 0x33),
             redis::encodeKvBlock(options_.scope, 1, 0x33, short_payload), 60s);
  client.set(redis::kvBlockKey(options_.scope, 1, 0x44), "garbage", 60s);
  const KvTierBlock loads[] = {{0x11, 5}, {0x22, 6}, {0x33, 7}, {0x44, 0}, {0x55, 3}};
  EXPECT_EQ(reader.load(b, loads), (std::vector<float>{1, 1, 0, 0, 0}));
  fill(a, 1, 3.0f);
  EXPECT_EQ(exported(b, 5), exported(a, 1));
  EXPECT_EQ(exported(b, 6), exported(a, 2));
  EXPECT_EQ(reader.counters().fetched, 2u);
  EXPECT_EQ(reader.counters().fetch_failed, 3u);
  // Another rank's keys are not these.
  RankKvTier rank0(options_, 0, b.blockFloats());
  EXPECT_EQ(rank0.load(b, loads), (std::vector<float>(5, 0.0f)));
}

TEST_F(RankKvTierTest, AFullQueueDropsAndRedisDownLoadsNothing) {
  model::KvCache a = cache();
  fill(a, 0, 1.0f);
  options_.queue_blocks = 1;
  RankKvTier tier(options_, 0, a.blockFloats());
  server_->pause();  // the writer's SET waits out the timeout: the queue fills
  std::vector<KvTierBlock> many;
  for (uint32_t i = 0; i < 6; ++i) many.push_back({100 + i, 0});
  tier.store(a, many);
  EXPECT_GE(tier.counters().store_dropped, 4u);
  // Redis silent: the load gives up after the timeout and loads nothing.
  const KvTierBlock loads[] = {{100, 1}, {101, 2}};
  EXPECT_EQ(tier.load(a, loads), (std::vector<float>{0, 0}));
  server_->resume();
  server_->kill();
  EXPECT_EQ(tier.load(a, loads), (std::vector<float>{0, 0}));  // down: the same
  EXPECT_EQ(tier.counters().fetch_failed, 4u);
}

}  // namespace
}  // namespace tpnode::node
