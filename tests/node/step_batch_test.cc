// Step batch (node/step_batch.h): the one expansion of a step command that node 0 and the
// workers both run.
#include <gtest/gtest.h>

#include "node/step_batch.h"

namespace tpnode::node {
namespace {

TEST(StepBatchTest, ChunksExpandInOrderWithPositionsSlotsAndLogitsFlags) {
  StepCommand cmd;
  cmd.seqs.push_back({/*slot=*/2, /*start_pos=*/5, kLogitsLast, {10, 11, 12}});
  cmd.seqs.push_back({/*slot=*/0, /*start_pos=*/0, kLogitsAll, {20, 21}});
  cmd.seqs.push_back({/*slot=*/1, /*start_pos=*/7, 0, {30}});
  std::vector<model::BatchToken> batch = {{99, 99, 99, true}};  // replaced, not appended to
  expandStep(cmd, batch);
  ASSERT_EQ(batch.size(), 6u);
  const int32_t want[6][4] = {{10, 5, 2, 0}, {11, 6, 2, 0}, {12, 7, 2, 1},
                              {20, 0, 0, 1}, {21, 1, 0, 1}, {30, 7, 1, 0}};
  for (size_t i = 0; i < batch.size(); ++i) {
    EXPECT_EQ(batch[i].token, want[i][0]) << i;
    EXPECT_EQ(batch[i].pos, want[i][1]) << i;
    EXPECT_EQ(batch[i].slot, want[i][2]) << i;
    EXPECT_EQ(batch[i].logits, want[i][3] == 1) << i;
    EXPECT_FALSE(batch[i].tap) << i;
  }
  EXPECT_EQ(logitRows(cmd.seqs[0]), 1u);
  EXPECT_EQ(logitRows(cmd.seqs[1]), 2u);
  EXPECT_EQ(logitRows(cmd.seqs[2]), 0u);
}

TEST(StepBatchTest, RowsMatchTheTokensMarkedForLogits) {
  StepCommand cmd;
  cmd.seqs.push_back({0, 0, kLogitsLast | kLogitsAll, {1, 2, 3, 4}});
  cmd.seqs.push_back({1, 3, kLogitsLast, {5}});
  std::vector<model::BatchToken> batch;
  expandStep(cmd, batch);
  size_t marked = 0, rows = 0;
  for (const auto& t : batch) marked += t.logits ? 1 : 0;
  for (const auto& c : cmd.seqs) rows += logitRows(c);
  EXPECT_EQ(marked, rows);
  EXPECT_EQ(rows, 5u);
}

// A chunk's first n_tap tokens are marked for taps (the prompt positions of a tapping request).
TEST(StepBatchTest, TheFirstNTapTokensOfAChunkAreTapped) {
  StepCommand cmd;
  cmd.seqs.push_back({0, 0, kLogitsLast, {1, 2, 3}});
  cmd.seqs.back().n_tap = 2;
  cmd.seqs.push_back({1, 3, kLogitsLast, {5}});
  std::vector<model::BatchToken> batch;
  expandStep(cmd, batch);
  ASSERT_EQ(batch.size(), 4u);
  EXPECT_TRUE(batch[0].tap);
  EXPECT_TRUE(batch[1].tap);
  EXPECT_FALSE(batch[2].tap);
  EXPECT_FALSE(batch[3].tap);
}

}  // namespace
}  // namespace tpnode::node
