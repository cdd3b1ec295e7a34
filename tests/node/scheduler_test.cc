#include <gtest/gtest.h>

#include <string>

#include "node/scheduler.h"

namespace tpnode::node {
namespace {

SchedulerOptions opts(int slots, int budget, int chunk) {
  SchedulerOptions o;
  o.slots = slots;
  o.ctx_size = 64;
  o.max_step_tokens = budget;
  o.prefill_chunk = chunk;
  return o;
}

std::vector<int32_t> prompt(int n) {
  return std::vector<int32_t>(static_cast<size_t>(n), 7);
}

TEST(SchedulerTest, PrefillsInChunksThenDecodes) {
  Scheduler s(opts(2, 16, 4));
  Sequence* a = s.add(1, prompt(10), 3);
  std::vector<std::unique_ptr<Sequence>> removed;
  std::vector<size_t> chunk_sizes;
  for (int i = 0; i < 3; ++i) {
    PlannedStep p = s.plan(removed);
    ASSERT_EQ(p.command.seqs.size(), 1u);
    chunk_sizes.push_back(p.command.seqs[0].tokens.size());
    EXPECT_EQ(p.command.seqs[0].start_pos, static_cast<uint32_t>(4 * i));
    EXPECT_EQ(p.sampled.size(), i == 2 ? 1u : 0u);  // logits only with the last prompt token
    s.commit(p);
  }
  EXPECT_EQ(chunk_sizes, (std::vector<size_t>{4, 4, 2}));
  a->tokens.push_back(9);  // the sampled token
  PlannedStep d = s.plan(removed);
  ASSERT_EQ(d.command.seqs.size(), 1u);
  EXPECT_EQ(d.command.seqs[0].tokens, std::vector<int32_t>{9});
  EXPECT_EQ(d.command.seqs[0].start_pos, 10u);
}

TEST(SchedulerTest, DecodesAreNotStalledByLongPrompts) {
  Scheduler s(opts(2, 5, 8));
  Sequence* a = s.add(1, prompt(2), 10);
  std::vector<std::unique_ptr<Sequence>> removed;
  s.commit(s.plan(removed));  // a's prompt
  a->tokens.push_back(1);
  s.add(2, prompt(40), 10);
  PlannedStep p = s.plan(removed);
  ASSERT_EQ(p.command.seqs.size(), 2u);
  EXPECT_EQ(p.command.seqs[0].tokens.size(), 1u);  // a decodes first
  EXPECT_EQ(p.command.seqs[1].tokens.size(), 4u);  // b's chunk fits in what is left
}

TEST(SchedulerTest, SlotsAreReusedAndClearedEverywhere) {
  Scheduler s(opts(1, 16, 16));
  Sequence* a = s.add(1, prompt(3), 1);
  s.add(2, prompt(3), 1);
  std::vector<std::unique_ptr<Sequence>> removed;
  PlannedStep p1 = s.plan(removed);
  EXPECT_EQ(s.waiting(), 1u);  // one slot: b waits
  s.commit(p1);
  a->finished = true;
  PlannedStep p2 = s.plan(removed);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0]->id, 1u);
  EXPECT_EQ(p2.command.clear_slots, std::vector<uint32_t>{0});
  ASSERT_EQ(p2.participants.size(), 1u);
  EXPECT_EQ(p2.participants[0]->id, 2u);
  EXPECT_EQ(p2.participants[0]->slot, 0);
}

TEST(SchedulerTest, CancelLeavesAtTheNextBoundary) {
  Scheduler s(opts(2, 16, 16));
  s.add(1, prompt(3), 5);
  s.add(2, prompt(3), 5);
  std::vector<std::unique_ptr<Sequence>> removed;
  s.commit(s.plan(removed));
  s.cancel(2);
  PlannedStep p = s.plan(removed);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0]->id, 2u);
  EXPECT_EQ(s.running(), 1u);
  EXPECT_EQ(s.freeSlots(), 1);
  (void)p;
}

// Paged KV and prefix reuse: blocks of 4 positions.
SchedulerOptions paged(int slots, int kv_blocks, int chunk = 64) {
  SchedulerOptions o = opts(slots, 256, chunk);
  o.kv_block_size = 4;
  o.kv_blocks = kv_blocks;
  o.fingerprint = 99;
  return o;
}

std::vector<int32_t> ramp(int first, int n) {
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back(first + i);
  return v;
}

// Runs plan + commit until `s` has every token in the cache.
void prefill(Scheduler& sched, Sequence* s, std::vector<std::unique_ptr<Sequence>>& removed) {
  for (int guard = 0; guard < 100 && s->n_cached < s->tokens.size(); ++guard) {
    sched.commit(sched.plan(removed));
  }
  ASSERT_EQ(s->n_cached, s->tokens.size());
}

const SeqChunk* chunkOf(const PlannedStep& p, const Sequence* s) {
  for (size_t i = 0; i < p.participants.size(); ++i) {
    if (p.participants[i] == s) return &p.command.seqs[i];
  }
  return nullptr;
}

TEST(SchedulerTest, ReusesTheLongestCachedPrefixOfWholeBlocks) {
  struct Case {
    std::string name;
    std::vector<int32_t> second;
    uint32_t start;  // first position the second request prefills
  };
  std::vector<int32_t> shared = ramp(1, 10);
  std::vector<int32_t> diverge = ramp(1, 6);
  diverge.insert(diverge.end(), {90, 91, 92});
  const std::vector<Case> cases = {
      {"longer prompt", ramp(1, 13), 8},
      {"same prompt: its last block is recomputed", shared, 8},
      {"exactly two blocks: the last token is computed", ramp(1, 8), 4},
      {"diverges inside block 1", diverge, 4},
      {"nothing shared", ramp(50, 9), 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Scheduler s(paged(2, 32));
    std::vector<std::unique_ptr<Sequence>> removed;
    Sequence* a = s.add(1, shared, 1);
    prefill(s, a, removed);
    const std::vector<uint32_t> a_blocks = a->blocks;
    a->finished = true;
    Sequence* b = s.add(2, c.second, 1);
    PlannedStep p = s.plan(removed);
    const SeqChunk* chunk = chunkOf(p, b);
    ASSERT_NE(chunk, nullptr);
    EXPECT_EQ(chunk->start_pos, c.start);
    EXPECT_EQ(chunk->tokens.size(), c.second.size() - c.start);
    ASSERT_GE(chunk->blocks.size(), (c.second.size() + 3) / 4);
    for (uint32_t i = 0; i < c.start / 4; ++i) EXPECT_EQ(chunk->blocks[i], a_blocks[i]);
    EXPECT_EQ(b->cached_prompt, c.start);
    EXPECT_EQ(s.prefixStats().cached_tokens, c.start);
    EXPECT_EQ(s.prefixStats().hits, c.start > 0 ? 1u : 0u);
  }
}

TEST(SchedulerTest, ABlockUnderPrefillIsNotShared) {
  Scheduler s(paged(2, 32, /*chunk=*/4));
  std::vector<std::unique_ptr<Sequence>> removed;
  Sequence* a = s.add(1, ramp(1, 12), 1);
  s.commit(s.plan(removed));  // a's block 0 is complete
  Sequence* b = s.add(2, ramp(1, 12), 1);
  PlannedStep p = s.plan(removed);  // a prefills block 1 in this very step
  const SeqChunk* chunk = chunkOf(p, b);
  ASSERT_NE(chunk, nullptr);
  EXPECT_EQ(chunk->start_pos, 4u) << "only the published block is reused";
  EXPECT_EQ(chunk->blocks[0], a->blocks[0]);
  EXPECT_NE(chunk->blocks[1], a->blocks[1]);
}

TEST(SchedulerTest, PrefixCacheOffReusesNothing) {
  SchedulerOptions o = paged(2, 32);
  o.prefix_cache = false;
  Scheduler s(o);
  std::vector<std::unique_ptr<Sequence>> removed;
  Sequence* a = s.add(1, ramp(1, 12), 1);
  prefill(s, a, removed);
  a->finished = true;
  Sequence* b = s.add(2, ramp(1, 12), 1);
  PlannedStep p = s.plan(removed);
  ASSERT_NE(chunkOf(p, b), nullptr);
  EXPECT_EQ(chunkOf(p, b)->start_pos, 0u);
  EXPECT_EQ(s.blockStats().cached, 0u);
}

TEST(SchedulerTest, MemoryFollowsUseNotSlotsTimesContext) {
  // 4 slots x 64 positions would be 64 blocks; 20 are enough for one long and three short.
  Scheduler s(paged(4, 20));
  std::vector<std::unique_ptr<Sequence>> removed;
  Sequence* longer = s.add(1, ramp(1, 60), 1);
  std::vector<Sequence*> shorts;
  for (int i = 0; i < 3; ++i) shorts.push_back(s.add(10 + i, ramp(100 * (i + 1), 3), 1));
  s.commit(s.plan(removed));
  EXPECT_EQ(s.running(), 4u);
  EXPECT_EQ(longer->blocks.size(), 15u) << "more than its 20 / 4 share";
  for (Sequence* q : shorts) EXPECT_EQ(q->blocks.size(), 1u);
  EXPECT_EQ(s.blockStats().free, 2u);
  // A fifth request whose prompt does not fit the free blocks waits (FIFO) for them.
  s.add(20, ramp(500, 12), 1);
  s.plan(removed);
  EXPECT_EQ(s.waiting(), 1u);
}

TEST(SchedulerTest, ADecodeShortOfBlocksPreemptsTheNewestSequence) {
  Scheduler s(paged(2, 16));  // one context of 64 positions
  std::vector<std::unique_ptr<Sequence>> removed;
  Sequence* a = s.add(1, ramp(1, 32), 40);
  Sequence* b = s.add(2, ramp(200, 32), 40);
  s.commit(s.plan(removed));
  ASSERT_EQ(s.running(), 2u);
  EXPECT_EQ(s.blockStats().free, 0u);
  a->tokens.push_back(5);  // position 32: a needs a ninth block
  b->tokens.push_back(6);
  PlannedStep p = s.plan(removed);
  ASSERT_EQ(p.participants.size(), 1u);
  EXPECT_EQ(p.participants[0], a);
  EXPECT_EQ(p.command.seqs[0].start_pos, 32u);
  EXPECT_EQ(p.command.seqs[0].blocks.size(), 9u);
  EXPECT_EQ(s.waiting(), 1u);
  EXPECT_EQ(b->n_cached, 0u);
  EXPECT_TRUE(b->blocks.empty());
  EXPECT_EQ(s.prefixStats().preemptions, 1u);
  s.commit(p);
  a->finished = true;
  // b comes back and finds its blocks still cached but the last one, which a's ninth block
  // evicted (a released sequence's tail goes first): it recomputes that block and its token.
  PlannedStep q = s.plan(removed);
  const SeqChunk* chunk = chunkOf(q, b);
  ASSERT_NE(chunk, nullptr);
  EXPECT_EQ(chunk->start_pos, 28u);
  EXPECT_EQ(chunk->tokens, std::vector<int32_t>(b->tokens.begin() + 28, b->tokens.end()));
  EXPECT_EQ(q.sampled.size(), 1u);
  EXPECT_EQ(b->cached_prompt, 0u) << "usage counts the first admission only";
}

}  // namespace
}  // namespace tpnode::node
