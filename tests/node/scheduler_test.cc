#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <set>
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

// Steps in flight (a pipeline of 2 stages): the decoding sequences split into two disjoint
// steps; a sequence waiting for its sampled token sits out; each step's sequences come back
// together once their step is committed and sampled.
TEST(SchedulerTest, GroupsSplitTheDecodesOverStepsInFlight) {
  SchedulerOptions o = opts(4, 64, 16);
  o.groups = 2;
  Scheduler s(o);
  std::vector<Sequence*> seqs;
  for (uint64_t id = 1; id <= 4; ++id) seqs.push_back(s.add(id, prompt(3), 10));
  std::vector<std::unique_ptr<Sequence>> removed;
  s.commit(s.plan(removed));  // every prompt in one step (not decoding yet: no cap)
  for (Sequence* q : seqs) q->tokens.push_back(1);
  PlannedStep a = s.plan(removed);
  PlannedStep b = s.plan(removed);
  PlannedStep c = s.plan(removed);  // everything is in flight
  ASSERT_EQ(a.participants.size(), 2u);
  ASSERT_EQ(b.participants.size(), 2u);
  EXPECT_TRUE(c.command.seqs.empty());
  for (Sequence* q : a.participants) {
    EXPECT_TRUE(std::find(b.participants.begin(), b.participants.end(), q) == b.participants.end());
    EXPECT_TRUE(q->inFlight());
  }
  EXPECT_EQ(b.command.step_id, a.command.step_id + 1);
  s.commit(a);
  for (Sequence* q : a.participants) q->tokens.push_back(2);
  PlannedStep a2 = s.plan(removed);  // a's sequences again, while b is in flight
  EXPECT_EQ(a2.participants, a.participants);
  EXPECT_EQ(a2.command.seqs[0].start_pos, 4u);
}

// A long prompt's chunks go out one after the other without waiting for each other's results;
// only the last one asks for logits.
TEST(SchedulerTest, PromptChunksFollowEachOtherInFlight) {
  SchedulerOptions o = opts(2, 64, 4);
  o.groups = 2;
  Scheduler s(o);
  s.add(1, prompt(10), 3);
  std::vector<std::unique_ptr<Sequence>> removed;
  std::vector<PlannedStep> steps;
  for (int i = 0; i < 4; ++i) steps.push_back(s.plan(removed));
  ASSERT_EQ(steps[0].command.seqs.size(), 1u);
  ASSERT_EQ(steps[1].command.seqs.size(), 1u);
  ASSERT_EQ(steps[2].command.seqs.size(), 1u);
  EXPECT_TRUE(steps[3].command.seqs.empty());  // waits for its sampled token
  EXPECT_EQ(steps[1].command.seqs[0].start_pos, 4u);
  EXPECT_EQ(steps[2].command.seqs[0].start_pos, 8u);
  EXPECT_EQ(steps[2].sampled.size(), 1u);
  EXPECT_TRUE(steps[0].sampled.empty() && steps[1].sampled.empty());
}

// A finished or cancelled sequence with a step in flight keeps its slot until the step is
// committed; its slot's clear is not lost to a plan that has nothing to run.
TEST(SchedulerTest, ASequenceLeavesOnlyWhenNoStepOfItsIsInFlight) {
  SchedulerOptions o = opts(2, 64, 16);
  o.groups = 2;
  Scheduler s(o);
  Sequence* a = s.add(1, prompt(3), 5);
  std::vector<std::unique_ptr<Sequence>> removed;
  PlannedStep p = s.plan(removed);
  s.cancel(1);
  EXPECT_TRUE(s.plan(removed).command.seqs.empty());
  EXPECT_TRUE(removed.empty());  // still in flight
  EXPECT_EQ(s.freeSlots(), 1);
  s.commit(p);
  EXPECT_FALSE(a->inFlight());
  EXPECT_TRUE(s.plan(removed).command.seqs.empty());
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(s.freeSlots(), 2);
  s.add(2, prompt(3), 5);
  PlannedStep next = s.plan(removed);
  EXPECT_EQ(next.command.clear_slots, std::vector<uint32_t>{0});
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

// Steps in flight with few KV blocks (a pipeline of 2 stages): a decode short of a block never
// preempts a sequence whose step is in flight; it waits until that step is committed.
TEST(SchedulerTest, StepsInFlightNeverPreemptASequenceInFlight) {
  SchedulerOptions o = paged(2, 16);  // one context of 64 positions
  o.groups = 2;
  Scheduler s(o);
  std::vector<std::unique_ptr<Sequence>> removed;
  Sequence* a = s.add(1, ramp(1, 31), 40);
  Sequence* b = s.add(2, ramp(200, 30), 40);
  s.commit(s.plan(removed));  // both prompts: 8 blocks each, none free
  ASSERT_EQ(s.blockStats().free, 0u);
  a->tokens.push_back(5);  // a decodes position 31 (block 7), b position 30
  b->tokens.push_back(6);
  PlannedStep p1 = s.plan(removed);  // one decode a step: a
  PlannedStep p2 = s.plan(removed);  // then b, while a's step is in flight
  ASSERT_EQ(p1.participants, std::vector<Sequence*>{a});
  ASSERT_EQ(p2.participants, std::vector<Sequence*>{b});
  s.commit(p1);
  a->tokens.push_back(7);  // position 32: a needs a ninth block; b's step is in flight
  const std::vector<uint32_t> b_blocks = b->blocks;
  PlannedStep p3 = s.plan(removed);
  EXPECT_TRUE(p3.command.seqs.empty()) << "a waits for b's step";
  EXPECT_EQ(s.prefixStats().preemptions, 0u);
  EXPECT_EQ(s.running(), 2u);
  EXPECT_EQ(b->blocks, b_blocks);
  EXPECT_EQ(b->slot, 1);
  s.commit(p2);  // b's step is back: b may now be preempted
  b->tokens.push_back(8);
  PlannedStep p4 = s.plan(removed);
  ASSERT_EQ(p4.participants, std::vector<Sequence*>{a});
  EXPECT_EQ(p4.command.seqs[0].start_pos, 32u);
  EXPECT_EQ(p4.command.seqs[0].blocks.size(), 9u);
  EXPECT_EQ(s.prefixStats().preemptions, 1u);
  EXPECT_EQ(s.waiting(), 1u);
  EXPECT_TRUE(b->blocks.empty());
  EXPECT_EQ(b->n_issued, 0u);
}

// Prefix reuse across steps in flight: a block is shared only once the step that wrote it is
// committed, and the tables of later requests name the blocks that hold their prefix.
TEST(SchedulerTest, PrefixReuseAcrossStepsInFlight) {
  SchedulerOptions o = paged(4, 32, /*chunk=*/4);
  o.groups = 2;
  Scheduler s(o);
  std::vector<std::unique_ptr<Sequence>> removed;
  Sequence* a = s.add(1, ramp(1, 12), 4);
  PlannedStep p1 = s.plan(removed);  // a's block 0
  PlannedStep p2 = s.plan(removed);  // block 1, while p1 is in flight
  ASSERT_EQ(chunkOf(p2, a)->start_pos, 4u);
  EXPECT_EQ(chunkOf(p2, a)->blocks.size(), 3u) << "admission took the whole prompt's blocks";
  s.commit(p1);
  Sequence* b = s.add(2, ramp(1, 12), 4);
  PlannedStep p3 = s.plan(removed);  // a's block 2, b: only block 0 is published
  const SeqChunk* bc = chunkOf(p3, b);
  ASSERT_NE(bc, nullptr);
  EXPECT_EQ(bc->start_pos, 4u);
  EXPECT_EQ(bc->blocks[0], a->blocks[0]);
  EXPECT_NE(bc->blocks[1], a->blocks[1]) << "block 1 is still being written by p2";
  s.commit(p2);
  s.commit(p3);
  Sequence* c = s.add(3, ramp(1, 13), 4);
  PlannedStep p4 = s.plan(removed);
  const SeqChunk* cc = chunkOf(p4, c);
  ASSERT_NE(cc, nullptr);
  EXPECT_EQ(cc->start_pos, 12u);
  ASSERT_EQ(cc->blocks.size(), 4u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(cc->blocks[i], a->blocks[i]);
  EXPECT_EQ(c->cached_prompt, 12u);
  for (const PlannedStep* p : {&p3, &p4}) {  // no block is written by two sequences
    for (size_t i = 0; i < p->participants.size(); ++i) {
      const SeqChunk& x = p->command.seqs[i];
      const uint32_t written = x.blocks[x.start_pos / 4];
      for (Sequence* q : {a, b, c}) {
        if (q == p->participants[i]) continue;
        const size_t shared_upto = q->hashes.size();  // q only reads its published blocks
        for (size_t k = shared_upto; k < q->blocks.size(); ++k) EXPECT_NE(q->blocks[k], written);
      }
    }
  }
}

// A finished sequence with a step in flight keeps its blocks until the step is committed.
TEST(SchedulerTest, BlocksOfASequenceInFlightAreReleasedOnlyAfterItsStep) {
  SchedulerOptions o = paged(2, 16);
  o.groups = 2;
  Scheduler s(o);
  std::vector<std::unique_ptr<Sequence>> removed;
  Sequence* a = s.add(1, ramp(1, 10), 4);
  PlannedStep p = s.plan(removed);
  const uint32_t free_in_flight = s.blockStats().free;
  s.cancel(1);
  EXPECT_TRUE(s.plan(removed).command.seqs.empty());
  EXPECT_TRUE(removed.empty());
  EXPECT_EQ(s.blockStats().free, free_in_flight);
  EXPECT_EQ(a->blocks.size(), 3u);
  s.commit(p);
  s.plan(removed);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(s.blockStats().free, 16u);
}

// Steps in flight with few blocks, many requests sharing prefixes, cancellations: a simulated
// pipeline of `groups` stages (steps run in plan order, committed oldest first). Every chunk
// must find its sequence's tokens in the blocks its table names (prefix reuse, eviction and
// preemption never hand out a block that is still read or written), no step in flight loses
// its sequence, and every request ends.
TEST(SchedulerTest, StepsInFlightWithFewBlocksKeepEverySequencesCache) {
  uint64_t preemptions = 0, hits = 0;  // the runs exercise both
  for (int groups = 1; groups <= 3; ++groups) {
    for (uint32_t seed = 1; seed <= 12; ++seed) {
      SCOPED_TRACE(::testing::Message() << "groups " << groups << " seed " << seed);
      SchedulerOptions o = paged(4, 16 + static_cast<int>(seed % 3) * 4, /*chunk=*/6);
      o.max_step_tokens = 16;
      o.groups = groups;
      Scheduler s(o);
      uint32_t rng = seed * 2654435761u;
      auto next = [&](uint32_t n) {
        rng = rng * 1664525u + 1013904223u;
        return (rng >> 8) % n;
      };
      // cache[block][offset]: the token a step wrote there (-1: never written).
      std::vector<std::vector<int32_t>> cache(s.blockStats().total, std::vector<int32_t>(4, -1));
      std::vector<std::unique_ptr<Sequence>> removed;
      std::deque<PlannedStep> in_flight;
      int added = 0, ended = 0;
      for (int round = 0; round < 2000 && ended < 24; ++round) {
        if (added < 24 && next(3) == 0) {
          std::vector<int32_t> p = ramp(1 + static_cast<int>(next(3)) * 100, 4 + next(20));
          for (uint32_t k = next(6); k > 0; --k) p.push_back(1000 + static_cast<int>(next(50)));
          s.add(static_cast<uint64_t>(++added), p, 1 + static_cast<int>(next(20)));
        }
        if (added > 0 && next(40) == 0) s.cancel(1 + next(static_cast<uint32_t>(added)));
        while (in_flight.size() < static_cast<size_t>(groups)) {
          PlannedStep p = s.plan(removed);
          for (auto& r : removed) {
            EXPECT_FALSE(r->inFlight()) << "sequence " << r->id << " left with a step in flight";
            ++ended;
          }
          removed.clear();
          if (p.command.seqs.empty()) break;
          for (size_t i = 0; i < p.participants.size(); ++i) {  // run the step
            const Sequence& q = *p.participants[i];
            const SeqChunk& c = p.command.seqs[i];
            for (uint32_t pos = 0; pos < c.start_pos + c.tokens.size(); ++pos) {
              ASSERT_LT(pos / 4, c.blocks.size());
              int32_t& cell = cache[c.blocks[pos / 4]][pos % 4];
              if (pos >= c.start_pos) {
                cell = c.tokens[pos - c.start_pos];
              } else {
                ASSERT_EQ(cell, q.tokens[pos]) << "sequence " << q.id << " position " << pos;
              }
            }
          }
          in_flight.push_back(std::move(p));
        }
        if (in_flight.empty()) continue;
        PlannedStep done = std::move(in_flight.front());
        in_flight.pop_front();
        for (size_t i = 0; i < done.participants.size(); ++i) {
          const Sequence& q = *done.participants[i];
          ASSERT_GE(q.slot, 0) << "sequence " << q.id << " was preempted with a step in flight";
          ASSERT_GE(q.blocks.size(), done.command.seqs[i].blocks.size());
          EXPECT_TRUE(std::equal(done.command.seqs[i].blocks.begin(),
                                 done.command.seqs[i].blocks.end(), q.blocks.begin()));
        }
        s.commit(done);
        for (Sequence* q : done.sampled) {
          if (q->finished || q->cancelled) continue;
          q->tokens.push_back(2000 + static_cast<int32_t>(q->tokens.size()));
          q->finished = static_cast<int>(q->generated()) >= q->max_new_tokens;
        }
      }
      EXPECT_EQ(ended, added) << "every request ends";
      EXPECT_EQ(s.running() + s.waiting(), 0u);
      preemptions += s.prefixStats().preemptions;
      hits += s.prefixStats().hits;
    }
  }
  EXPECT_GT(preemptions, 0u);
  EXPECT_GT(hits, 0u);
}

// A second tier that holds a fixed set of block hashes.
class FakeTier : public KvTierLookup {
 public:
  size_t present(std::span<const uint64_t> hashes) override {
    size_t n = 0;
    while (n < hashes.size() && held.count(hashes[n]) != 0) ++n;
    asked += hashes.size();
    return n;
  }
  std::set<uint64_t> held;
  size_t asked = 0;
};

// Every block that enters the index is named once in a step's stores.
TEST(SchedulerTest, PublishedBlocksAreStoredOnce) {
  FakeTier tier;
  Scheduler s(paged(2, 32));
  s.setKvTier(&tier);
  std::vector<std::unique_ptr<Sequence>> removed;
  Sequence* a = s.add(1, ramp(1, 10), 1);
  std::vector<KvTierBlock> stored;
  for (int guard = 0; guard < 10 && a->n_cached < a->tokens.size(); ++guard) {
    PlannedStep p = s.plan(removed);
    stored.insert(stored.end(), p.stores.begin(), p.stores.end());
    s.commit(p);
  }
  PlannedStep p = s.plan(removed);  // the stores of the last commit go out with the next plan
  stored.insert(stored.end(), p.stores.begin(), p.stores.end());
  ASSERT_EQ(stored.size(), 2u);  // two full blocks of 4
  EXPECT_EQ(stored[0].block, a->blocks[0]);
  EXPECT_EQ(stored[0].hash, a->hashes[0]);
  EXPECT_EQ(stored[1].hash, a->hashes[1]);
}

// Blocks the tier holds are loaded before the rest is prefilled; the cluster's agreed result
// counts up to the first block that some rank could not load.
TEST(SchedulerTest, TierLoadsCountUpToTheFirstFailure) {
  for (const std::vector<bool>& loaded :
       {std::vector<bool>{true, true}, std::vector<bool>{true, false},
        std::vector<bool>{false, true}}) {
    SCOPED_TRACE(testing::PrintToString(loaded));
    FakeTier tier;
    const std::vector<int32_t> tokens = ramp(1, 13);
    uint64_t h = 99;  // the fingerprint of paged()
    for (int b = 0; b < 3; ++b) {
      h = kvBlockHash(h, std::span<const int32_t>(tokens).subspan(static_cast<size_t>(b) * 4, 4));
      if (b < 2) tier.held.insert(h);  // the tier holds blocks 0 and 1, not 2
    }
    Scheduler s(paged(2, 32));
    s.setKvTier(&tier);
    std::vector<std::unique_ptr<Sequence>> removed;
    Sequence* a = s.add(1, tokens, 1);
    PlannedStep p = s.plan(removed);
    EXPECT_TRUE(p.command.seqs.empty());  // it sits out the step that loads
    ASSERT_EQ(p.loads.size(), 2u);
    ASSERT_EQ(p.loading, std::vector<Sequence*>{a});
    EXPECT_EQ(p.loads[0].block, a->blocks[0]);
    EXPECT_EQ(p.loads[1].block, a->blocks[1]);
    s.finishLoads(p, loaded);
    const size_t ok = loaded[0] ? (loaded[1] ? 2 : 1) : 0;
    EXPECT_EQ(a->n_cached, ok * 4);
    EXPECT_EQ(a->cached_prompt, ok * 4);
    EXPECT_EQ(s.prefixStats().tier_loaded, ok);
    EXPECT_EQ(s.prefixStats().tier_failed, 2 - ok);
    PlannedStep q = s.plan(removed);
    const SeqChunk* chunk = chunkOf(q, a);
    ASSERT_NE(chunk, nullptr);
    EXPECT_EQ(chunk->start_pos, ok * 4);  // the rest is prefilled
    EXPECT_TRUE(q.stores.empty());        // loaded blocks are not stored again
    s.commit(q);
    // Loaded or computed, a's blocks are in the index: a second request reuses them locally
    // (without asking the tier).
    a->finished = true;
    const size_t asked = tier.asked;
    Sequence* b = s.add(2, tokens, 1);
    s.plan(removed);
    EXPECT_EQ(b->n_cached, 12u);
    EXPECT_EQ(tier.asked, asked);
  }
}

}  // namespace
}  // namespace tpnode::node
