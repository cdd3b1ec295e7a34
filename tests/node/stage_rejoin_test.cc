// Re-forming a cluster whose stages --split auto chose (node/stage_rejoin.h), with every node a
// thread of this process over real loopback sockets: node 0 re-forming with the stages it runs
// meets a node that starts afresh (chooseStagesAtFormation, as a restarted process does) in the
// split probe, and that node adopts node 0's stages; a node that stayed with other stages
// loaded is refused naming both.
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
                           [&] { return agreeOnChosenStages(node0, model_, nullptr, {}); });
  // The restarted worker: its startup choice, which node 0 answers with its stages.
  ASSERT_TRUE(splitChoiceNeeded(given(1)));
  EXPECT_EQ(chooseStagesAtFormation(given(1), false), 2);
  EXPECT_EQ(driver.get(), 2);
}

TEST_F(StageRejoinTest, ANodeWithOtherStagesLoadedIsRefused) {
  Options node0 = given(0);
  node0.pp = 2;
  node0.pp_chosen = true;
  Options node1 = given(1);
  node1.pp = 1;  // it loaded tensor parallelism (a restarted node 0 chose otherwise)
  node1.pp_chosen = true;
  auto driver = std::async(std::launch::async,
                           [&] { return agreeOnChosenStages(node0, model_, nullptr, {}); });
  try {
    agreeOnChosenStages(node1, model_, nullptr, {});
    ADD_FAILURE() << "node 1 kept 1 stage against node 0's 2";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kMismatch);
    EXPECT_NE(std::string(e.what()).find("node 0 now runs 2 stage(s), this node loaded 1"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(driver.get(), 2);
}

}  // namespace
}  // namespace tpnode::node
