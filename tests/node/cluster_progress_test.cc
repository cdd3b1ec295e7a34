// Progress, not only liveness, with real processes on loopback (a generated model, a random
// cluster secret): a worker that keeps heartbeating but never answers a step is lost after
// --step-timeout (the request in flight gets 503 instead of hanging) and rejoins by itself once
// it answers again; a worker paused (SIGSTOP) past the liveness timeout and resumed (SIGCONT)
// rejoins the cluster without a restart and serves requests.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/mesh/free_ports.h"
#include "tests/mesh/process.h"
#include "tests/support/http_client.h"
#include "tests/support/small_model.h"

namespace tpnode::node {
namespace {

using mesh::test::Process;
using namespace std::chrono_literals;

class ClusterProgressTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = mesh::test::makeTempDir("cluster_progress_");
    ASSERT_FALSE(dir_.empty());
    model_ = dir_ + "/model.gguf";
    testing_support::writeSmallTestModel(model_);
    // 256 random bits as hex, mode 0600.
    secret_ = dir_ + "/cluster.secret";
    std::ofstream(secret_) << mesh::test::randomSecretHex() << "\n";
    ::chmod(secret_.c_str(), 0600);
  }

  void SetUp() override {
    peers_ = mesh::test::loopbackPeers(2);
    api_port_ = mesh::test::freePort();
  }

  std::unique_ptr<Process> start(int node, const std::string& tag,
                                 std::vector<std::string> env = {}) {
    std::vector<std::string> a = {"--model",
                                  model_,
                                  "--node-id",
                                  std::to_string(node),
                                  "--peers",
                                  peers_,
                                  "--tp",
                                  "1",
                                  "--liveness-timeout",
                                  "2",
                                  "--step-timeout",
                                  "3",
                                  "--connect-timeout",
                                  "60",
                                  "--parallel",
                                  "2",
                                  "--ctx-size",
                                  "256",
                                  "--cluster-secret-file",
                                  secret_};
    if (node == 0) a.insert(a.end(), {"--port", std::to_string(api_port_)});
    return std::make_unique<Process>(a, std::move(env), dir_ + "/" + tag + ".log");
  }

  test::HttpResponse health() {
    return test::httpRequest("127.0.0.1", api_port_, "GET", "/health", "", 5);
  }

  test::HttpResponse complete(int max_tokens) {
    return test::httpRequest("127.0.0.1", api_port_, "POST", "/v1/completions",
                             R"({"prompt": "a b ab", "max_tokens": )" + std::to_string(max_tokens) +
                                 R"(, "temperature": 0, "ignore_eos": true})",
                             30);
  }

  bool awaitHealth(int status, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (health().status == status) return true;
      std::this_thread::sleep_for(100ms);
    }
    return false;
  }

  static inline std::string dir_, model_, secret_;
  std::string peers_;
  uint16_t api_port_ = 0;
};

TEST_F(ClusterProgressTest, HeartbeatingButSilentWorkerIsLostAfterStepTimeoutAndRejoins) {
  auto driver = start(0, "silent_driver");
  // Test-only fault injection (node/worker.h): silent from its 3rd step until dropped.
  auto worker = start(1, "silent_worker", {"TPNODE_TEST_STALL_AT_STEP=3"});
  ASSERT_TRUE(awaitHealth(200, 60s)) << driver->log() << worker->log();

  const auto t0 = std::chrono::steady_clock::now();
  test::HttpResponse stalled = complete(8);  // prefill + decode steps: stalls at step 3
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(stalled.status, 503) << stalled.body << "\n" << driver->log();
  EXPECT_NE(stalled.body.find("step-timeout"), std::string::npos) << stalled.body;
  std::printf("[progress] the stalled request came back with %d after %.1f s (--step-timeout 3)\n",
              stalled.status, seconds);
  EXPECT_TRUE(worker->waitForLog("stalling at step 3", 5s)) << worker->log();

  // Dropped, the worker notices and rejoins by itself; serving resumes.
  ASSERT_TRUE(awaitHealth(200, 40s)) << driver->log() << worker->log();
  test::HttpResponse after = complete(4);
  EXPECT_EQ(after.status, 200) << after.body;
  EXPECT_TRUE(worker->waitForLog("rejoined the driver", 1s)) << worker->log();

  driver->signal(SIGTERM);
  EXPECT_EQ(driver->wait(30s), 0) << driver->log();
  EXPECT_EQ(worker->wait(30s), 0) << worker->log();
}

TEST_F(ClusterProgressTest, PausedWorkerRejoinsAfterResumeWithoutRestart) {
  auto driver = start(0, "paused_driver");
  auto worker = start(1, "paused_worker");
  ASSERT_TRUE(awaitHealth(200, 60s)) << driver->log() << worker->log();
  ASSERT_EQ(complete(4).status, 200);

  worker->signal(SIGSTOP);
  ASSERT_TRUE(awaitHealth(503, 15s)) << driver->log();
  EXPECT_EQ(complete(4).status, 503);
  std::this_thread::sleep_for(1s);
  worker->signal(SIGCONT);

  ASSERT_TRUE(awaitHealth(200, 40s)) << driver->log() << worker->log();
  test::HttpResponse after = complete(4);
  EXPECT_EQ(after.status, 200) << after.body;
  EXPECT_NE(after.body.find("\"text\""), std::string::npos) << after.body;
  EXPECT_TRUE(worker->waitForLog("rejoined the driver", 1s)) << worker->log();

  driver->signal(SIGTERM);
  EXPECT_EQ(driver->wait(30s), 0) << driver->log();
  EXPECT_EQ(worker->wait(30s), 0) << worker->log() << "\n(the same process, never restarted)";
}

}  // namespace
}  // namespace tpnode::node
