#include <gtest/gtest.h>

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

}  // namespace
}  // namespace tpnode::node
