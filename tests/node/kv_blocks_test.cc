// KvBlockPool (node/kv_blocks.h): allocation, reference counts, the prefix index (reuse of the
// longest cached prefix, collisions never shared), LRU eviction and the observer, table-driven.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "node/kv_blocks.h"

namespace tpnode::node {
namespace {

constexpr uint32_t kBs = 4;
constexpr uint64_t kSeed = 77;

std::vector<int32_t> toks(std::initializer_list<int32_t> v) {
  return v;
}

// Publishes the blocks of `tokens` held in `blocks` (all full), as the Scheduler does.
std::vector<uint64_t> publishAll(KvBlockPool& pool, const std::vector<uint32_t>& blocks,
                                 const std::vector<int32_t>& tokens) {
  std::vector<uint64_t> hashes;
  for (size_t i = 0; i < blocks.size() && (i + 1) * kBs <= tokens.size(); ++i) {
    const uint64_t prev = i == 0 ? kSeed : hashes.back();
    hashes.push_back(
        pool.publish(blocks[i], prev, std::span<const int32_t>(tokens).subspan(i * kBs, kBs)));
  }
  return hashes;
}

std::vector<uint32_t> take(KvBlockPool& pool, size_t n) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < n; ++i) {
    auto b = pool.allocate();
    EXPECT_TRUE(b.has_value());
    if (b) out.push_back(*b);
  }
  return out;
}

struct MatchCase {
  std::string name;
  std::vector<int32_t> cached;  // a sequence whose full blocks were published, then released
  std::vector<int32_t> query;
  size_t max_blocks;
  size_t want_blocks;
};

TEST(KvBlockPoolTest, MatchesTheLongestCachedPrefixOfWholeBlocks) {
  const std::vector<int32_t> a = toks({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13});
  const std::vector<MatchCase> cases = {
      {"same prompt", a, a, 100, 3},
      {"limit leaves a token to compute", a, toks({1, 2, 3, 4, 5, 6, 7, 8}), 1, 1},
      {"diverges in block 2", a, toks({1, 2, 3, 4, 5, 6, 7, 0, 9, 10, 11, 12}), 100, 1},
      {"diverges in block 1", a, toks({0, 2, 3, 4, 5, 6, 7, 8}), 100, 0},
      {"shorter than a block", a, toks({1, 2, 3}), 100, 0},
      {"same block after another prefix", a, toks({5, 6, 7, 8}), 100, 0},
  };
  for (const MatchCase& c : cases) {
    SCOPED_TRACE(c.name);
    KvBlockPool pool(16, kBs, true, kSeed);
    std::vector<uint32_t> held = take(pool, (c.cached.size() + kBs - 1) / kBs);
    publishAll(pool, held, c.cached);
    for (uint32_t b : held) pool.release(b);
    std::vector<uint32_t> blocks;
    std::vector<uint64_t> hashes;
    pool.matchPrefix(c.query, c.max_blocks, blocks, hashes);
    ASSERT_EQ(blocks.size(), c.want_blocks);
    EXPECT_EQ(hashes.size(), c.want_blocks);
    for (size_t i = 0; i < blocks.size(); ++i) EXPECT_EQ(blocks[i], held[i]);
  }
}

TEST(KvBlockPoolTest, ReferenceCountsKeepSharedBlocksOutOfTheFreeList) {
  KvBlockPool pool(4, kBs, true, kSeed);
  const auto p = toks({1, 2, 3, 4, 5, 6, 7, 8});
  std::vector<uint32_t> a = take(pool, 2);
  publishAll(pool, a, p);
  EXPECT_EQ(pool.freeBlocks(), 2u);
  std::vector<uint32_t> b;
  std::vector<uint64_t> h;
  pool.matchPrefix(p, 2, b, h);  // a second holder of both blocks
  ASSERT_EQ(b, a);
  pool.release(a[0]);
  pool.release(a[1]);
  EXPECT_EQ(pool.freeBlocks(), 2u) << "still held by the second sequence";
  pool.release(b[0]);
  pool.release(b[1]);
  EXPECT_EQ(pool.freeBlocks(), 4u);
  EXPECT_EQ(pool.stats().cached, 2u) << "released blocks stay cached";
}

class Recorder : public KvBlockObserver {
 public:
  void onCached(uint32_t block, uint64_t) override { cached.push_back(block); }
  void onEvict(uint32_t block, uint64_t) override { evicted.push_back(block); }
  std::vector<uint32_t> cached, evicted;
};

TEST(KvBlockPoolTest, EvictsTheLeastRecentlyReleasedCachedBlockWhenNoneIsFree) {
  KvBlockPool pool(3, kBs, true, kSeed);
  Recorder rec;
  pool.setObserver(&rec);
  const auto p = toks({1, 2, 3, 4}), q = toks({5, 6, 7, 8}), r = toks({9, 9, 9, 9});
  std::vector<uint32_t> bp = take(pool, 1), bq = take(pool, 1), br = take(pool, 1);
  publishAll(pool, bp, p);
  publishAll(pool, bq, q);
  publishAll(pool, br, r);
  EXPECT_EQ(rec.cached, (std::vector<uint32_t>{bp[0], bq[0], br[0]}));
  pool.release(bq[0]);  // q first: least recent
  pool.release(bp[0]);
  // r stays held.
  std::vector<uint32_t> got, none;
  std::vector<uint64_t> h;
  pool.matchPrefix(p, 1, got, h);  // touching p takes it out of the LRU...
  pool.release(got[0]);            // ...and puts it back as the most recent
  auto fresh = pool.allocate();
  ASSERT_TRUE(fresh.has_value());
  EXPECT_EQ(*fresh, bq[0]);
  EXPECT_EQ(rec.evicted, std::vector<uint32_t>{bq[0]});
  pool.matchPrefix(q, 1, none, h);
  EXPECT_TRUE(none.empty()) << "an evicted block is no longer found";
  auto next = pool.allocate();
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(*next, bp[0]);
  EXPECT_FALSE(pool.allocate().has_value()) << "r is still held";
  EXPECT_EQ(pool.stats().evictions, 2u);
}

TEST(KvBlockPoolTest, ABlockIsSharedOnlyOncePublished) {
  KvBlockPool pool(4, kBs, true, kSeed);
  const auto p = toks({1, 2, 3, 4, 5});
  std::vector<uint32_t> a = take(pool, 2);  // being prefilled: nothing published yet
  std::vector<uint32_t> got;
  std::vector<uint64_t> h;
  pool.matchPrefix(p, 1, got, h);
  EXPECT_TRUE(got.empty());
  publishAll(pool, a, p);  // block 0 complete
  pool.matchPrefix(p, 1, got, h);
  EXPECT_EQ(got, std::vector<uint32_t>{a[0]});
}

TEST(KvBlockPoolTest, ADuplicateBlockStaysPrivateAndNothingIsIndexedWhenOff) {
  KvBlockPool pool(4, kBs, true, kSeed);
  const auto p = toks({1, 2, 3, 4});
  std::vector<uint32_t> a = take(pool, 1), b = take(pool, 1);
  const auto ha = publishAll(pool, a, p), hb = publishAll(pool, b, p);
  EXPECT_EQ(ha, hb);
  EXPECT_EQ(pool.stats().cached, 1u);
  pool.release(b[0]);
  EXPECT_EQ(pool.freeBlocks(), 3u);

  KvBlockPool off(4, kBs, false, kSeed);
  std::vector<uint32_t> c = take(off, 1);
  publishAll(off, c, p);
  off.release(c[0]);
  std::vector<uint32_t> got;
  std::vector<uint64_t> h;
  off.matchPrefix(p, 1, got, h);
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(off.stats().cached, 0u);
}

TEST(KvBlockPoolTest, HashesChainThePrefixAndTheFingerprint) {
  const auto x = toks({1, 2, 3, 4});
  EXPECT_NE(kvBlockHash(1, x), kvBlockHash(2, x));
  EXPECT_NE(kvBlockHash(1, x), kvBlockHash(1, toks({1, 2, 3, 5})));
  EXPECT_EQ(kvBlockHash(1, x), kvBlockHash(1, x));
  EXPECT_NE(kvFingerprint("model-a", 16), kvFingerprint("model-b", 16));
  EXPECT_NE(kvFingerprint("model-a", 16), kvFingerprint("model-a", 32));
}

TEST(KvBlockPoolTest, ResetForgetsEveryBlock) {
  KvBlockPool pool(2, kBs, true, kSeed);
  const auto p = toks({1, 2, 3, 4});
  std::vector<uint32_t> a = take(pool, 2);
  publishAll(pool, a, p);
  pool.reset();
  EXPECT_EQ(pool.freeBlocks(), 2u);
  std::vector<uint32_t> got;
  std::vector<uint64_t> h;
  pool.matchPrefix(p, 1, got, h);
  EXPECT_TRUE(got.empty());
}

}  // namespace
}  // namespace tpnode::node
