// rankSetOptions: the RankSet options every node (the driver and each worker) builds from its
// flags and placement, so that all nodes load their ranks alike.
#include <gtest/gtest.h>

#include "node/rank_set_options.h"
#include "node/scheduler.h"

namespace tpnode::node {
namespace {

TEST(RankSetOptionsTest, TakesTheFlagsAndPlacement) {
  Options o;
  o.threads = 3;
  o.parallel = 0;  // at least one slot
  o.ctx_size = 4096;
  Placement p;
  p.cpu_of_rank = {2, 5};
  const RankSetOptions ro = rankSetOptions(o, p);
  EXPECT_EQ(ro.threads, 3);
  EXPECT_EQ(ro.slots, 1);
  EXPECT_EQ(ro.ctx, 4096);
  EXPECT_EQ(ro.cpu_of_rank, (std::vector<int>{2, 5}));
}

// Every node's ranks commit their batch buffers for the largest step node 0's scheduler sends
// (model::RankModel::reserveBatch), not for whatever smaller default RankSetOptions has.
TEST(RankSetOptionsTest, RanksReserveTheLargestStep) {
  const RankSetOptions ro = rankSetOptions(Options{}, Placement{});
  EXPECT_EQ(ro.reserve_tokens, SchedulerOptions{}.max_step_tokens);
  EXPECT_GT(ro.reserve_tokens, RankSetOptions{}.reserve_tokens);
}

}  // namespace
}  // namespace tpnode::node
