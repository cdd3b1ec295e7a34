// --split auto serving the API, with real processes on loopback and a generated 4-layer model.
// The rank figures are given (--split-rank-read / --split-rank-macs) so that the choice does not
// depend on the machine (docs/scaling.md, "Pipeline and hybrid plans"): ranks so fast that only
// the links count make pipeline stages win (they pay no all-reduce), ranks so slow that only
// the compute counts make tensor parallelism win (it divides the compute by the nodes).
// - 4 nodes choose 4 pipeline stages; a worker holding a middle stage killed while requests
//   are in flight fails them with 503; restarted with its command line, it adopts its stage and
//   the cluster answers with the greedy tokens of one node.
// - A worker restarted while node 0 re-forms, without the memory for the stage node 0 runs
//   (--host-memory, given through its environment), refuses it naming itself and the sizes;
//   node 0 logs that as a cluster fault and keeps waiting; the worker restarted with the
//   memory it needs rejoins and the cluster answers with the greedy tokens of one node.
// - Node 0 restarted with other figures chooses again (tensor, then 2 stages); the worker that
//   stayed loads node 0's new stages instead of keeping its own, and the cluster answers with
//   the greedy tokens of one node.
// - A worker that cannot load the stages a restarted node 0 chose (its copy of the model file is
//   gone) exits 3 at once naming them and why; node 0 learns why in the same probe exchange and
//   exits 1 at once naming the node and its reason (nothing hangs).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/mesh/process.h"
#include "tests/support/serving_cluster.h"
#include "tools/test_model.h"

namespace tpnode::node {
namespace {

using namespace std::chrono_literals;
using testing_support::ServingCluster;
using testing_support::ServingSpec;

const std::vector<std::string> kPipelineWins = {"--split-rank-read", "1e6", "--split-rank-macs",
                                                "1e9"};
const std::vector<std::string> kTensorWins = {"--split-rank-read", "0.001", "--split-rank-macs",
                                              "0.001"};

class SplitAutoServingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = mesh::test::makeTempDir("split_auto_serving_");
    ASSERT_FALSE(dir_.empty());
    tools::TestModelShape shape;
    shape.layers = 4;
    shape.type = model::TensorType::kQ8_0;
    model_ = dir_ + "/model.gguf";
    tools::writeTestModel(shape, model_);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  ServingSpec spec(int nodes, const std::string& tag, std::vector<std::string> extra = {}) const {
    std::vector<std::string> args = {"--liveness-timeout", "2",  "--connect-timeout", "60",
                                     "--rejoin-timeout",   "90", "--parallel",        "2",
                                     "--ctx-size",         "512"};
    args.insert(args.end(), extra.begin(), extra.end());
    return ServingSpec{.model = model_, .nodes = nodes, .args = args, .tag = tag, .log_dir = dir_};
  }

  // --split auto with rank figures that make pipeline stages win.
  ServingSpec pipelineWinsSpec(int nodes, const std::string& tag) const {
    std::vector<std::string> extra = {"--split", "auto"};
    extra.insert(extra.end(), kPipelineWins.begin(), kPipelineWins.end());
    return spec(nodes, tag, extra);
  }

  static nlohmann::json request(const std::string& prompt, int max_tokens) {
    return {{"prompt", prompt},
            {"max_tokens", max_tokens},
            {"temperature", 0},
            {"ignore_eos", true},
            {"logprobs", 1}};
  }
  // The greedy tokens of an answer, one by one, and its text.
  static std::string text(const test::HttpResponse& r) {
    const nlohmann::json choice = nlohmann::json::parse(r.body)["choices"][0];
    return choice["logprobs"]["tokens"].dump() + " " + choice["text"].get<std::string>();
  }

  // The greedy tokens of one node for each prompt.
  std::vector<std::string> oneNodeTexts(const std::vector<std::string>& prompts) {
    ServingCluster one(spec(1, "one"));
    one.startAll();
    EXPECT_TRUE(one.awaitHealth(200, 60s)) << one.logs();
    std::vector<std::string> out;
    for (const std::string& p : prompts) {
      const test::HttpResponse r = one.complete(request(p, 12));
      EXPECT_EQ(r.status, 200) << r.body;
      if (r.status == 200) {
        EXPECT_EQ(nlohmann::json::parse(r.body)["choices"][0]["logprobs"]["tokens"].size(), 12u)
            << r.body;
      }
      out.push_back(r.status == 200 ? text(r) : std::string());
    }
    one.expectCleanShutdown();
    return out;
  }

  std::string dir_, model_;
};

const std::vector<std::string> kPrompts = {"a b", "ab ba", "b a b", "ba ab a"};

TEST_F(SplitAutoServingTest, FourNodesChooseStagesAndARestartedMiddleStageAdoptsIt) {
  const std::vector<std::string> expected = oneNodeTexts(kPrompts);
  ServingCluster c(pipelineWinsSpec(4, "auto4"));
  c.startAll();
  ASSERT_TRUE(c.awaitHealth(200, 90s)) << c.logs();
  EXPECT_TRUE(c.node(0).waitForLog(" chosen: pipeline 4 stages", 1s)) << c.node(0).log();
  for (int n = 1; n < 4; ++n) {
    EXPECT_TRUE(c.node(n).waitForLog("--split auto: node 0 chose 4 stages", 1s)) << c.node(n).log();
  }
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    const test::HttpResponse r = c.complete(request(kPrompts[i], 12));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(text(r), expected[i]) << kPrompts[i];
  }

  // Node 2 (stage 2) stops before the requests go out, so that their steps wait on it, and is
  // killed inside the liveness timeout (2 s) while they are in flight.
  c.node(2).signal(SIGSTOP);
  std::vector<test::HttpResponse> answers(2);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < answers.size(); ++i) {
    clients.emplace_back([&, i] { answers[i] = c.complete(request(kPrompts[i], 400)); });
  }
  std::this_thread::sleep_for(500ms);
  c.node(2).signal(SIGKILL);
  for (auto& t : clients) t.join();
  for (size_t i = 0; i < answers.size(); ++i) {
    EXPECT_EQ(answers[i].status, 503) << i << ": " << answers[i].body << "\n" << c.node(0).log();
  }
  ASSERT_TRUE(c.awaitHealth(503, 10s)) << c.node(0).log();

  // Restarted with its original command line (--split auto, no --pp): it adopts stage 2.
  c.start(2, {}, "again");
  ASSERT_TRUE(c.awaitHealth(200, 120s)) << c.logs();
  EXPECT_TRUE(c.node(0).waitForLog("re-forming with the 4 stage(s) chosen at startup", 1s))
      << c.node(0).log();
  EXPECT_TRUE(c.node(2).waitForLog("--split auto: node 0 chose 4 stages", 1s)) << c.node(2).log();
  EXPECT_TRUE(c.node(2).waitForLog("pipeline plan, 4 stages", 1s)) << c.node(2).log();
  std::vector<test::HttpResponse> after(kPrompts.size());
  clients.clear();
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    clients.emplace_back([&, i] { after[i] = c.complete(request(kPrompts[i], 12)); });
  }
  for (auto& t : clients) t.join();
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    ASSERT_EQ(after[i].status, 200) << after[i].body;
    EXPECT_EQ(text(after[i]), expected[i]) << kPrompts[i];
  }
  c.expectCleanShutdown();
}

TEST_F(SplitAutoServingTest, ARestartedWorkerWithoutMemoryForItsStageIsRefusedUntilItHasIt) {
  const std::vector<std::string> expected = oneNodeTexts(kPrompts);
  ServingCluster c(pipelineWinsSpec(2, "memory"));
  c.startAll();
  ASSERT_TRUE(c.awaitHealth(200, 90s)) << c.logs();
  EXPECT_TRUE(c.node(0).waitForLog(" chosen: pipeline 2 stages", 1s)) << c.node(0).log();

  c.node(1).signal(SIGKILL);
  EXPECT_EQ(c.node(1).wait(10s), 128 + SIGKILL);
  ASSERT_TRUE(c.awaitHealth(503, 10s)) << c.node(0).log();
  // 1 KiB for stage 1's two layers and their KV cache: refused in the probe exchange.
  c.start(1, {"TPNODE_HOST_MEMORY=0.000001"}, "small");
  const int code = c.node(1).wait(60s);
  EXPECT_NE(code, 0) << c.node(1).log();
  EXPECT_NE(code, -1) << "still running\n" << c.node(1).log();
  const std::string refusal = "node 1 (pipeline stage 1, layers ";
  EXPECT_TRUE(c.node(1).waitForLog(refusal, 1s)) << c.node(1).log();
  EXPECT_TRUE(c.node(1).waitForLog("but has 1.0 KiB available", 1s)) << c.node(1).log();
  EXPECT_TRUE(c.node(0).waitForLog(
      "cluster fault: --split auto: node 1 cannot run the 2 stage(s) node 0 chose: " + refusal,
      10s))
      << c.node(0).log();
  // Node 0 neither exits nor serves: it waits for the node to come back.
  EXPECT_FALSE(c.node(0).exited());
  const test::HttpResponse health = c.get("/health");
  EXPECT_EQ(health.status, 503);
  EXPECT_NE(health.body.find("node 1 cannot run the 2 stage(s) node 0 chose"), std::string::npos)
      << health.body;

  c.start(1, {}, "again");
  ASSERT_TRUE(c.awaitHealth(200, 120s)) << c.logs();
  EXPECT_TRUE(c.node(1).waitForLog("--split auto: node 0 chose 2 stages", 1s)) << c.node(1).log();
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    const test::HttpResponse r = c.complete(request(kPrompts[i], 12));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(text(r), expected[i]) << kPrompts[i];
  }
  c.expectCleanShutdown();
}

TEST_F(SplitAutoServingTest, ARestartedNodeZeroChoosesAgainAndTheWorkersFollow) {
  const std::vector<std::string> expected = oneNodeTexts(kPrompts);
  // Node 0's figures decide (the slowest node's count; the worker measures its own at startup
  // and reports none when it meets a restarted node 0).
  ServingSpec s = spec(2, "restart0", {"--split", "auto"});
  s.node0_args = kTensorWins;
  ServingCluster c(s);
  c.startAll();
  ASSERT_TRUE(c.awaitHealth(200, 90s)) << c.logs();
  EXPECT_TRUE(c.node(0).waitForLog(" chosen: tensor 2x1", 1s)) << c.node(0).log();
  const test::HttpResponse before = c.complete(request(kPrompts[0], 12));
  ASSERT_EQ(before.status, 200) << before.body;

  c.node(0).signal(SIGKILL);
  EXPECT_EQ(c.node(0).wait(10s), 128 + SIGKILL);
  EXPECT_TRUE(c.node(1).waitForLog("the driver (node 0) was lost", 10s)) << c.node(1).log();
  // The whole cluster's node 0 again, measuring other figures: it chooses 2 stages now.
  c.setNode0Args(kPipelineWins);
  c.start(0, {}, "again");
  ASSERT_TRUE(c.awaitHealth(200, 120s)) << c.logs();
  EXPECT_TRUE(c.node(0).waitForLog(" chosen: pipeline 2 stages", 1s)) << c.node(0).log();
  EXPECT_TRUE(c.node(1).waitForLog(
      "node 0 now runs 2 stage(s) (it was restarted and chose again); this node loaded 1: "
      "loading node 0's stages",
      1s))
      << c.node(1).log();
  EXPECT_TRUE(c.node(1).waitForLog("rejoined the driver", 1s)) << c.node(1).log();
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    const test::HttpResponse r = c.complete(request(kPrompts[i], 12));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(text(r), expected[i]) << kPrompts[i];
  }
  c.expectCleanShutdown();  // node 1: the same process throughout, exits 0
}

TEST_F(SplitAutoServingTest, AWorkerThatCannotLoadTheStagesNodeZeroChoseExitsNamingThem) {
  // The worker reads its own copy of the model, which is gone by the time node 0 restarted:
  // the stages node 0 chooses then cannot load on it.
  const std::string worker_model = dir_ + "/worker.gguf";
  std::filesystem::copy_file(model_, worker_model);
  ServingSpec s = spec(2, "unloadable", {"--split", "auto"});
  s.worker_model = worker_model;
  // Node 0's --connect-timeout differs between its two starts (the worker keeps the default).
  const auto timeout = std::find(s.args.begin(), s.args.end(), "--connect-timeout");
  ASSERT_NE(timeout, s.args.end());
  s.args.erase(timeout, timeout + 2);
  s.node0_args = kTensorWins;
  s.node0_args.insert(s.node0_args.end(), {"--connect-timeout", "60"});
  ServingCluster c(s);
  c.startAll();
  ASSERT_TRUE(c.awaitHealth(200, 90s)) << c.logs();
  EXPECT_TRUE(c.node(0).waitForLog(" chosen: tensor 2x1", 1s)) << c.node(0).log();

  c.node(0).signal(SIGKILL);
  EXPECT_EQ(c.node(0).wait(10s), 128 + SIGKILL);
  EXPECT_TRUE(c.node(1).waitForLog("the driver (node 0) was lost", 10s)) << c.node(1).log();
  std::filesystem::remove(worker_model);
  // Node 0 again, choosing 2 stages now (with a short --connect-timeout, 10 s: it must not be
  // what ends node 0).
  std::vector<std::string> again = kPipelineWins;
  again.insert(again.end(), {"--connect-timeout", "10"});
  c.setNode0Args(again);
  c.start(0, {}, "again");
  // The worker: told node 0's stages, cannot load them, says which and why, exits 3 (not after
  // its --rejoin-timeout of 90 s, and not as if the driver had not come back).
  EXPECT_EQ(c.node(1).wait(60s), 3) << c.node(1).log();
  const std::string worker_log = c.node(1).log();
  EXPECT_NE(worker_log.find("node 0 now runs 2 stage(s)"), std::string::npos) << worker_log;
  EXPECT_NE(worker_log.find("could not load the 2 stage(s) node 0 chose: "), std::string::npos)
      << worker_log;
  EXPECT_NE(worker_log.find("worker.gguf"), std::string::npos) << worker_log;  // the reason
  EXPECT_EQ(worker_log.find("did not come back within --rejoin-timeout"), std::string::npos)
      << worker_log;
  // Node 0: told by node 1 in the probe exchange, it names node 1 and its reason and exits 1
  // at once (not after its --connect-timeout), never serving.
  EXPECT_EQ(c.node(0).wait(60s), 1) << c.node(0).log();
  const std::string node0_log = c.node(0).log();
  EXPECT_NE(node0_log.find(" chosen: pipeline 2 stages"), std::string::npos) << node0_log;
  EXPECT_NE(node0_log.find("--split auto: node 1 cannot run the 2 stage(s) node 0 chose: "),
            std::string::npos)
      << node0_log;
  EXPECT_NE(node0_log.find("worker.gguf"), std::string::npos) << node0_log;  // node 1's reason
  EXPECT_EQ(node0_log.find("the cluster could not form"), std::string::npos) << node0_log;
  EXPECT_EQ(node0_log.find("[cluster] ready"), std::string::npos) << node0_log;
}

}  // namespace
}  // namespace tpnode::node
