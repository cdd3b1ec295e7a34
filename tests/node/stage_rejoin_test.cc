// Re-forming a cluster whose stages --split auto chose (node/stage_rejoin.h), with every node a
// thread of this process over real loopback sockets: node 0 re-forming with the stages it runs
// meets a node that starts afresh (chooseStagesAtFormation, as a restarted process does) in the
// split probe, and that node adopts node 0's stages; a node 0 restarted with other figures
// chooses anew, and a node that stayed with other stages loaded is told node 0's choice (it
// loads those there: node/worker.cc), whichever way the choice went; a node that cannot run
// node 0's stages (restarted, or one that stayed) is named with its reason in node 0's error.
#include "node/stage_rejoin.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <future>
#include <string>

#include "common/error.h"
#include "model/model_identity.h"
#include "node/split_choice.h"
#include "tests/mesh/free_ports.h"
#include "tools/test_model.h"

namespace tpnode::node {
namespace {

class StageRejoinTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tools::TestModelShape shape;
    shape.layers = 4;
    path_ = ::testing::TempDir() + "/stage_rejoin_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".gguf";
    tools::writeTestModel(shape, path_);
    model_.identity = model::modelIdentity(*model::GgufFile::open(path_));
    peers_ = mesh::test::loopbackPeers(2);
  }
  void TearDown() override { std::filesystem::remove(path_); }

  // Node `id`'s options as its command line gives them: --split auto on 2 nodes.
  Options given(int id) const {
    Options o;
    o.model = path_;
    o.node_id = id;
    o.peers = peers_;
    o.insecure = true;
    o.split = SplitFlag::kAuto;
    o.connect_timeout_s = 20;
    o.tp_layout = {1, 1};  // as finishLayout() leaves it
    return o;
  }

  std::string path_, peers_;
  LoadedModel model_;  // node 0's (only its identity is used)
};

TEST_F(StageRejoinTest, ARestartedNodeAdoptsTheStagesNodeZeroRuns) {
  Options node0 = given(0);
  node0.pp = 2;  // chosen at startup
  node0.pp_chosen = true;
  auto driver = std::async(std::launch::async,
                           [&] { return agreeOnChosenStages(node0, model_, nullptr, {}, {}); });
  // The restarted worker: its startup choice, which node 0 answers with its stages; it loads
  // them inside the exchange (as node/cluster_mode.cc does), once.
  ASSERT_TRUE(splitChoiceNeeded(given(1)));
  std::unique_ptr<LoadedModel> loaded;
  int loads = 0;
  EXPECT_EQ(chooseStagesAtFormation(given(1), false,
                                    [&](int stages) {
                                      ++loads;
                                      return loadChosenStages(given(1), stages, loaded);
                                    }),
            2);
  EXPECT_EQ(driver.get(), 2);
  EXPECT_EQ(loads, 1);
  ASSERT_NE(loaded, nullptr);
  EXPECT_EQ(loaded->topology.stages(), 2);
  EXPECT_EQ(loaded->topology.stage(), 1);
}

// Node 0 re-forming (node/driver.cc) meets a restarted worker that cannot run its stages: node
// 0's error, which the driver logs as a cluster fault, names the worker and why.
TEST_F(StageRejoinTest, NodeZeroReFormingLearnsWhyARestartedNodeCannotRunItsStages) {
  Options node0 = given(0);
  node0.pp = 2;
  node0.pp_chosen = true;
  auto driver = std::async(std::launch::async, [&] {
    try {
      agreeOnChosenStages(node0, model_, nullptr, {}, {});
    } catch (const Error& e) {
      return std::pair(e.code(), std::string(e.what()));
    }
    return std::pair(ErrorCode::kInternal, std::string("no error"));
  });
  EXPECT_THROW(chooseStagesAtFormation(given(1), false,
                                       [](int) { return std::string("stage 1 needs 9 GiB"); }),
               Error);
  const auto [code, error] = driver.get();
  EXPECT_EQ(code, ErrorCode::kResource);
  EXPECT_EQ(error,
            "--split auto: node 1 cannot run the 2 stage(s) node 0 chose: stage 1 needs 9 GiB");
}

// Rank figures that make the choice on loopback (docs/scaling.md, "Pipeline and hybrid plans"):
// ranks so fast that only the links count (2 stages pay no all-reduce: pipeline), or so slow
// that only the compute counts (tensor parallelism halves it: tensor).
void figures(Options& o, bool pipeline_wins) {
  o.split_rank_read_gbps = pipeline_wins ? 1e6 : 1e-3;
  o.split_rank_gmacs = pipeline_wins ? 1e9 : 1e-3;
}

TEST_F(StageRejoinTest, ANodeThatStayedIsToldTheStagesARestartedNodeZeroChose) {
  for (const bool pipeline_now : {true, false}) {
    SCOPED_TRACE(pipeline_now ? "node 0 now chooses 2 stages" : "node 0 now chooses tensor");
    // Node 0, restarted with other figures, chooses at its startup.
    Options node0 = given(0);
    figures(node0, pipeline_now);
    ASSERT_TRUE(splitChoiceNeeded(node0));
    auto driver =
        std::async(std::launch::async, [&] { return chooseStagesAtFormation(node0, false, {}); });
    // Node 1 stayed, with the stages the previous node 0 chose (the other plan) loaded.
    Options node1 = given(1);
    node1.pp = pipeline_now ? 1 : 2;
    node1.pp_chosen = true;
    std::unique_ptr<LoadedModel> loaded;
    const int told = agreeOnChosenStages(node1, model_, nullptr, {}, [&](int stages) {
      return loadChosenStages(node1, stages, loaded);
    });
    const int chosen = driver.get();
    EXPECT_EQ(chosen, pipeline_now ? 2 : 1);
    EXPECT_EQ(told, chosen);  // node 1 loads node 0's stages: never a mix
    ASSERT_NE(loaded, nullptr);
    EXPECT_EQ(loaded->topology.stages(), chosen);
  }
}

// Node 1 stayed with tensor parallelism loaded; node 0, restarted, chooses 2 stages, which node
// 1 cannot load (here: the model file is gone): node 0's error names node 1 and why, and node 1
// fails with its own reason (node/worker.cc then exits).
TEST_F(StageRejoinTest, NodeZeroLearnsWhyANodeThatStayedCannotLoadItsChoice) {
  Options node0 = given(0);
  figures(node0, /*pipeline_wins=*/true);
  auto driver = std::async(std::launch::async, [&] {
    try {
      chooseStagesAtFormation(node0, false, {});
    } catch (const Error& e) {
      return std::pair(e.code(), std::string(e.what()));
    }
    return std::pair(ErrorCode::kInternal, std::string("no error"));
  });
  Options node1 = given(1);
  node1.pp = 1;
  node1.pp_chosen = true;
  node1.model = path_ + ".gone";
  std::unique_ptr<LoadedModel> loaded;
  try {
    agreeOnChosenStages(node1, model_, nullptr, {},
                        [&](int stages) { return loadChosenStages(node1, stages, loaded); });
    ADD_FAILURE() << "node 1 ran stages it cannot load";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kResource);
    EXPECT_NE(std::string(e.what()).find("this node cannot run the 2 stage(s) node 0 chose: "),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(loaded, nullptr);
  const auto [code, error] = driver.get();
  EXPECT_EQ(code, ErrorCode::kResource);
  EXPECT_NE(error.find("--split auto: node 1 cannot run the 2 stage(s) node 0 chose: "),
            std::string::npos)
      << error;
  EXPECT_NE(error.find(".gone"), std::string::npos) << error;  // the reason: its file
}
}  // namespace
}  // namespace tpnode::node
