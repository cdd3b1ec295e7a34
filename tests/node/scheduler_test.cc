#include <gtest/gtest.h>

#include <algorithm>

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

}  // namespace
}  // namespace tpnode::node
