// KvBlockStore over a real redis-server: blocks round-trip per rank, other scopes and ranks
// never see them, damaged values are refused, and a Redis that is down or killed is a miss
// counted as an error (the caller recomputes), never an exception or a hang.
#include "node/redis/kv_block_store.h"

#include <gtest/gtest.h>

#include "tests/node/redis/redis_server.h"

namespace tpnode::node::redis {
namespace {

using namespace std::chrono_literals;
using test::RedisServer;

KvBlockScope scope(const std::string& layout = "2,2") {
  KvBlockScope s;
  s.model_identity = "name=tiny;arch=llama;bytes=123;header_sha256=ab";
  std::vector<int> ranks;
  for (char c : layout)
    if (c != ',') ranks.push_back(c - '0');
  s.layout = collectives::Layout(ranks);
  s.pp_stages = 1;
  s.block_tokens = 16;
  s.cache_format = "f16";
  return s;
}

std::vector<uint8_t> bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

TEST(KvBlockKeyTest, KeysSeparateEveryPartOfTheScope) {
  const std::string base = kvBlockKey(scope(), 1, 0xabcdef);
  EXPECT_EQ(base.rfind("tpnode:kv:1:", 0), 0u) << base;
  EXPECT_NE(base.find(":r1:0000000000abcdef"), std::string::npos) << base;
  EXPECT_EQ(kvBlockKey(scope(), 1, 0xabcdef), base);  // a pure function
  EXPECT_NE(kvBlockKey(scope("1,1"), 1, 0xabcdef), base);
  EXPECT_NE(kvBlockKey(scope(), 0, 0xabcdef), base);
  EXPECT_NE(kvBlockKey(scope(), 1, 0xabcdee), base);
  for (auto change : std::vector<std::function<void(KvBlockScope&)>>{
           [](KvBlockScope& s) { s.model_identity += "x"; },
           [](KvBlockScope& s) { s.pp_stages = 2; },
           [](KvBlockScope& s) { s.stage_layers = "0-11,12-23"; },
           [](KvBlockScope& s) { s.block_tokens = 32; },
           [](KvBlockScope& s) { s.cache_format = "f32"; }}) {
    KvBlockScope s = scope();
    change(s);
    EXPECT_NE(kvBlockKey(s, 1, 0xabcdef), base) << s.canonical();
  }
  // Other layers of the stages, and a scope without stages names none.
  KvBlockScope staged = scope();
  staged.pp_stages = 2;
  staged.stage_layers = "0-11,12-23";
  KvBlockScope moved = staged;
  moved.stage_layers = "0-10,11-23";
  EXPECT_NE(kvBlockKey(staged, 1, 0xabcdef), kvBlockKey(moved, 1, 0xabcdef));
  EXPECT_NE(staged.canonical().find(";layers=0-11,12-23;"), std::string::npos)
      << staged.canonical();
  EXPECT_EQ(scope().canonical().find("layers"), std::string::npos) << scope().canonical();
}

TEST(KvBlockKeyTest, ValuesAreCheckedAgainstTheirKey) {
  const std::vector<uint8_t> payload = bytes(1000, 3);
  const std::string v = encodeKvBlock(scope(), 1, 42, payload);
  ASSERT_EQ(v.size(), kKvBlockHeaderBytes + payload.size());
  EXPECT_EQ(decodeKvBlock(scope(), 1, 42, v), payload);
  EXPECT_FALSE(decodeKvBlock(scope(), 0, 42, v));                          // another rank
  EXPECT_FALSE(decodeKvBlock(scope(), 1, 43, v));                          // another block
  EXPECT_FALSE(decodeKvBlock(scope("1,1"), 1, 42, v));                     // another layout
  EXPECT_FALSE(decodeKvBlock(scope(), 1, 42, v.substr(0, v.size() - 1)));  // short
  EXPECT_FALSE(decodeKvBlock(scope(), 1, 42, v + "x"));                    // long
  EXPECT_FALSE(decodeKvBlock(scope(), 1, 42, v.substr(0, 10)));
  EXPECT_FALSE(decodeKvBlock(scope(), 1, 42, ""));
  std::string flipped = v;
  flipped[kKvBlockHeaderBytes + 500] ^= 1;
  EXPECT_FALSE(decodeKvBlock(scope(), 1, 42, flipped));  // checksum
  EXPECT_EQ(decodeKvBlock(scope(), 1, 42, encodeKvBlock(scope(), 1, 42, {})),
            std::vector<uint8_t>{});
}

class KvBlockStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test::redisServerBinary().empty()) GTEST_SKIP() << test::kNoRedisReason;
    server_ = std::make_unique<RedisServer>();
    ASSERT_TRUE(server_->ok()) << server_->why();
  }
  KvBlockStoreOptions options(std::chrono::seconds ttl = 3600s) {
    KvBlockStoreOptions o;
    o.endpoint = server_->endpoint();
    o.timeout = 500ms;
    o.ttl = ttl;
    o.max_block_bytes = 1 << 20;
    return o;
  }
  std::unique_ptr<RedisServer> server_;
};

TEST_F(KvBlockStoreTest, BlocksRoundTripPerRankAndScope) {
  KvBlockStore r0(scope(), 0, options());
  KvBlockStore r1(scope(), 1, options());
  const auto a = bytes(4096, 1), b = bytes(4096, 2);
  EXPECT_TRUE(r0.put(7, a));
  EXPECT_TRUE(r1.put(7, b));
  EXPECT_EQ(r0.get(7), a);
  EXPECT_EQ(r1.get(7), b);
  EXPECT_FALSE(r0.get(8));
  // Another cluster: same model and block, another layout -> never these entries.
  KvBlockStore other(scope("1,1"), 0, options());
  EXPECT_FALSE(other.get(7));
  // A second cluster with the same scope (another process would do the same) reads them.
  KvBlockStore twin(scope(), 0, options());
  const uint64_t chain[] = {7, 8, 7};
  auto got = twin.getMany(chain);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], a);
  EXPECT_FALSE(got[1]);
  EXPECT_EQ(got[2], a);
  KvBlockCounters c = twin.counters();
  EXPECT_EQ(c.hits, 2u);
  EXPECT_EQ(c.misses, 1u);
  EXPECT_EQ(c.errors, 0u);
  EXPECT_EQ(c.bytes_read, 2u * a.size());
  EXPECT_EQ(r0.counters().puts, 1u);
  EXPECT_EQ(r0.counters().bytes_written, a.size());
  EXPECT_THROW(r0.put(9, bytes((1 << 20) + 1, 0)), Error);  // over the cap: a caller bug
}

// The chain lookup counts the blocks present from the first; Redis down answers 0.
TEST_F(KvBlockStoreTest, CountPresentCountsTheChainFromItsFirstBlock) {
  KvBlockStore store(scope(), 0, options());
  const auto a = bytes(512, 4);
  ASSERT_TRUE(store.put(1, a));
  ASSERT_TRUE(store.put(2, a));
  ASSERT_TRUE(store.put(4, a));
  const uint64_t chain[] = {1, 2, 3, 4};
  EXPECT_EQ(store.countPresent(chain), 2u);
  const uint64_t missing_first[] = {3, 1};
  EXPECT_EQ(store.countPresent(missing_first), 0u);
  KvBlockStore other_rank(scope(), 1, options());  // keys of rank 1: none stored
  EXPECT_EQ(other_rank.countPresent(chain), 0u);
  server_->kill();
  EXPECT_EQ(store.countPresent(chain), 0u);
  EXPECT_GE(store.counters().errors, 1u);
}

TEST_F(KvBlockStoreTest, DamagedValueIsAMissCountedAsError) {
  KvBlockStore store(scope(), 0, options());
  RedisClient raw(RedisClientOptions{server_->endpoint()});
  raw.set(kvBlockKey(scope(), 0, 5), "TPKV garbage", 0s);
  // A value of rank 1 put under rank 0's key.
  raw.set(kvBlockKey(scope(), 0, 6), encodeKvBlock(scope(), 1, 6, bytes(10, 0)), 0s);
  EXPECT_FALSE(store.get(5));
  EXPECT_FALSE(store.get(6));
  EXPECT_EQ(store.counters().errors, 2u);
  EXPECT_EQ(store.counters().hits, 0u);
}

TEST_F(KvBlockStoreTest, EntriesExpire) {
  KvBlockStore store(scope(), 0, options(1s));
  ASSERT_TRUE(store.put(1, bytes(100, 1)));
  EXPECT_TRUE(store.get(1));
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (store.get(1) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_FALSE(store.get(1)) << "the 1 s TTL never expired";
}

TEST_F(KvBlockStoreTest, RedisKilledMidRunDegradesToMisses) {
  KvBlockStore store(scope(), 0, options());
  const auto a = bytes(2048, 9);
  ASSERT_TRUE(store.put(1, a));
  server_->kill();
  for (int i = 0; i < 10; ++i) {
    EXPECT_FALSE(store.put(2, a));
    EXPECT_FALSE(store.get(1));  // the caller recomputes
  }
  EXPECT_EQ(store.counters().errors, 20u);
  ASSERT_TRUE(server_->restart()) << server_->why();
  // Back after the reconnect backoff (the restarted server is empty).
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!store.put(1, a) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(store.get(1), a);
}

}  // namespace
}  // namespace tpnode::node::redis
