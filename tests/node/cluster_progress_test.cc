// Progress, not only liveness, with real processes on loopback (a generated model, a random
// cluster secret): a worker that keeps heartbeating but never answers a step is lost after
// --step-timeout (the request in flight gets 503 instead of hanging) and rejoins by itself once
// it answers again; of three nodes, only the worker that stalls is declared lost (the healthy
// one stays connected and re-forms when node 0 resets it); a worker paused (SIGSTOP) past the
// liveness timeout and resumed (SIGCONT) rejoins the cluster without a restart and serves
// requests.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/mesh/process.h"
#include "tests/support/serving_cluster.h"
#include "tests/support/small_model.h"

namespace tpnode::node {
namespace {

using mesh::test::Process;
using namespace std::chrono_literals;
using testing_support::ServingCluster;

class ClusterProgressTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = mesh::test::makeTempDir("cluster_progress_");
    ASSERT_FALSE(dir_.empty());
    model_ = dir_ + "/model.gguf";
    testing_support::writeSmallTestModel(model_);
    // The same kind of model, split 3 ways: 6 heads / 3 kv heads, every width a multiple of 3
    // Q8_0 blocks.
    model3_ = dir_ + "/model3.gguf";
    tools::TestModelShape shape;
    shape.dim = 96;
    shape.heads = 6;
    shape.kv_heads = 3;
    shape.ffn = 192;
    shape.vocab = 768;
    shape.type = model::TensorType::kQ8_0;
    tools::writeTestModel(shape, model3_);
    // 256 random bits as hex, mode 0600.
    secret_ = dir_ + "/cluster.secret";
    std::ofstream(secret_) << mesh::test::randomSecretHex() << "\n";
    ::chmod(secret_.c_str(), 0600);
  }

  // `nodes` nodes (their secret from --cluster-secret-file); none is started yet.
  static ServingCluster cluster(int nodes, const std::string& tag) {
    return ServingCluster(
        {.model = nodes == 3 ? model3_ : model_,
         .nodes = nodes,
         .args = {"--tp", "1", "--liveness-timeout", "2", "--step-timeout", "3",
                  "--connect-timeout", "60", "--parallel", "2", "--ctx-size", "256"},
         .tag = tag,
         .log_dir = dir_,
         .secret_file = secret_});
  }

  static test::HttpResponse complete(const ServingCluster& c, int max_tokens) {
    return c.complete({{"prompt", "a b ab"},
                       {"max_tokens", max_tokens},
                       {"temperature", 0},
                       {"ignore_eos", true}},
                      30);
  }

  static inline std::string dir_, model_, model3_, secret_;
};

TEST_F(ClusterProgressTest, HeartbeatingButSilentWorkerIsLostAfterStepTimeoutAndRejoins) {
  ServingCluster c = cluster(2, "silent");
  Process& driver = c.start(0);
  // Test-only fault injection (node/worker.h): silent from its 3rd step until dropped.
  Process& worker = c.start(1, {"TPNODE_TEST_STALL_AT_STEP=3"});
  ASSERT_TRUE(c.awaitHealth(200, 60s)) << driver.log() << worker.log();

  const auto t0 = std::chrono::steady_clock::now();
  test::HttpResponse stalled = complete(c, 8);  // prefill + decode steps: stalls at step 3
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(stalled.status, 503) << stalled.body << "\n" << driver.log();
  EXPECT_NE(stalled.body.find("step-timeout"), std::string::npos) << stalled.body;
  std::printf("[progress] the stalled request came back with %d after %.1f s (--step-timeout 3)\n",
              stalled.status, seconds);
  EXPECT_TRUE(worker.waitForLog("stalling at step 3", 5s)) << worker.log();

  // Dropped, the worker notices and rejoins by itself; serving resumes.
  ASSERT_TRUE(c.awaitHealth(200, 40s)) << driver.log() << worker.log();
  test::HttpResponse after = complete(c, 4);
  EXPECT_EQ(after.status, 200) << after.body;
  EXPECT_TRUE(worker.waitForLog("rejoined the driver", 1s)) << worker.log();

  c.expectCleanShutdown();  // SIGTERM to node 0; both exit 0
}

TEST_F(ClusterProgressTest, OfThreeNodesOnlyTheStalledWorkerIsLost) {
  ServingCluster c = cluster(3, "three");
  Process& driver = c.start(0);
  Process& healthy = c.start(1);
  Process& stalling = c.start(2, {"TPNODE_TEST_STALL_AT_STEP=3"});
  ASSERT_TRUE(c.awaitHealth(200, 90s)) << driver.log() << healthy.log() << stalling.log();

  test::HttpResponse stalled = complete(c, 8);  // prefill + decode steps: node 2 stalls at step 3
  EXPECT_EQ(stalled.status, 503) << stalled.body << "\n" << driver.log();
  EXPECT_NE(stalled.body.find("step-timeout"), std::string::npos) << stalled.body;
  // Node 0 probed the workers and named node 2 alone, with how far it got.
  EXPECT_TRUE(
      driver.waitForLog("node 2 did not answer a step within --step-timeout 3.0 s: it "
                        "took up 2 of the 3 step commands sent to it (3 received)",
                        5s))
      << driver.log();
  // Node 1's collective ended with node 0's; it stayed connected and waited for the reset.
  EXPECT_TRUE(healthy.waitForLog("waiting for the driver to re-form", 5s)) << healthy.log();

  ASSERT_TRUE(c.awaitHealth(200, 60s)) << driver.log() << healthy.log() << stalling.log();
  test::HttpResponse after = complete(c, 4);
  EXPECT_EQ(after.status, 200) << after.body;
  EXPECT_TRUE(stalling.waitForLog("rejoined the driver", 1s)) << stalling.log();
  EXPECT_TRUE(healthy.waitForLog("node 1: re-forming the cluster", 1s)) << healthy.log();
  const std::string metrics = c.get("/metrics", 5).body;
  EXPECT_NE(metrics.find("tpnode_node_lost_total{peer=\"2\"} 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("tpnode_node_lost_total{peer=\"1\"} 0\n"), std::string::npos) << metrics;

  driver.signal(SIGTERM);
  EXPECT_EQ(driver.wait(30s), 0) << driver.log();
  EXPECT_EQ(healthy.wait(30s), 0) << healthy.log();
  EXPECT_EQ(stalling.wait(30s), 0) << stalling.log();
  const std::string log0 = driver.log();
  EXPECT_EQ(log0.find("node 1 lost"), std::string::npos) << log0;
  EXPECT_EQ(log0.find("node 1 did not"), std::string::npos) << log0;
  EXPECT_EQ(log0.find("cannot tell which node"), std::string::npos) << log0;
  const std::string log1 = healthy.log();
  EXPECT_EQ(log1.find("the driver (node 0) was lost"), std::string::npos) << log1;
  EXPECT_EQ(log1.find("rejoined the driver"), std::string::npos) << log1;
}

TEST_F(ClusterProgressTest, PausedWorkerRejoinsAfterResumeWithoutRestart) {
  ServingCluster c = cluster(2, "paused");
  Process& driver = c.start(0);
  Process& worker = c.start(1);
  ASSERT_TRUE(c.awaitHealth(200, 60s)) << driver.log() << worker.log();
  ASSERT_EQ(complete(c, 4).status, 200);

  worker.signal(SIGSTOP);
  ASSERT_TRUE(c.awaitHealth(503, 15s)) << driver.log();
  EXPECT_EQ(complete(c, 4).status, 503);
  std::this_thread::sleep_for(1s);
  worker.signal(SIGCONT);

  ASSERT_TRUE(c.awaitHealth(200, 40s)) << driver.log() << worker.log();
  test::HttpResponse after = complete(c, 4);
  EXPECT_EQ(after.status, 200) << after.body;
  EXPECT_NE(after.body.find("\"text\""), std::string::npos) << after.body;
  EXPECT_TRUE(worker.waitForLog("rejoined the driver", 1s)) << worker.log();

  driver.signal(SIGTERM);
  EXPECT_EQ(driver.wait(30s), 0) << driver.log();
  EXPECT_EQ(worker.wait(30s), 0) << worker.log() << "\n(the same process, never restarted)";
}

}  // namespace
}  // namespace tpnode::node
