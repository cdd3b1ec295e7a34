// Faults of a running cluster, with real processes on loopback: a killed worker is noticed
// within the liveness timeout, in-flight and new requests fail with 503 (never hang), the
// worker restarted rejoins and serving resumes without restarting node 0; a lost driver makes
// workers exit non-zero naming it; SIGTERM on node 0 stops the whole cluster with exit 0.
#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "tests/mesh/free_ports.h"
#include "tests/mesh/process.h"
#include "tests/model/reference_data.h"
#include "tests/support/http_client.h"

namespace tpnode::node {
namespace {

using mesh::test::Process;
using namespace std::chrono_literals;

class ClusterFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing_support::referenceModel("llama-tiny-q8_0");
    peers_ = mesh::test::loopbackPeers(2);
    api_port_ = mesh::test::freePort();
  }

  std::unique_ptr<Process> start(int node, const std::string& tag) {
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
                                  "--connect-timeout",
                                  "60",
                                  "--parallel",
                                  "2",
                                  "--ctx-size",
                                  "2048"};
    if (node == 0) a.insert(a.end(), {"--port", std::to_string(api_port_)});
    return std::make_unique<Process>(a,
                                     std::vector<std::string>{mesh::test::testClusterSecretEnv()},
                                     ::testing::TempDir() + "/fault_" + tag + ".log");
  }

  test::HttpResponse health() {
    return test::httpRequest("127.0.0.1", api_port_, "GET", "/health", "", 5);
  }

  test::HttpResponse complete(int max_tokens) {
    return test::httpRequest("127.0.0.1", api_port_, "POST", "/v1/completions",
                             R"({"prompt": "Hello world", "max_tokens": )" +
                                 std::to_string(max_tokens) +
                                 R"(, "temperature": 0, "ignore_eos": true})",
                             30);
  }

  // Polls /health until it answers `status`; false after `timeout`.
  bool awaitHealth(int status, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (health().status == status) return true;
      std::this_thread::sleep_for(100ms);
    }
    return false;
  }

  std::string model_, peers_;
  uint16_t api_port_ = 0;
};

TEST_F(ClusterFaultTest, KilledWorkerIsReportedAndRejoins) {
  auto driver = start(0, "driver");
  auto worker = start(1, "worker1");
  ASSERT_TRUE(awaitHealth(200, 60s)) << driver->log();
  auto first = complete(4);
  ASSERT_EQ(first.status, 200) << first.body;

  worker->signal(SIGKILL);
  worker->wait(5s);
  auto killed_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(awaitHealth(503, 10s)) << driver->log();
  double detect_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  EXPECT_LT(detect_s, 2.0 + 3.0) << "liveness timeout is 2 s";
  auto during = complete(4);
  EXPECT_EQ(during.status, 503) << during.body;

  auto restarted = start(1, "worker2");
  ASSERT_TRUE(awaitHealth(200, 30s)) << driver->log();
  auto after = complete(4);
  EXPECT_EQ(after.status, 200) << after.body;
  EXPECT_NE(after.body.find("\"text\""), std::string::npos) << after.body;

  driver->signal(SIGTERM);
  EXPECT_EQ(driver->wait(30s), 0) << driver->log();
  EXPECT_EQ(restarted->wait(30s), 0) << restarted->log();
}

TEST_F(ClusterFaultTest, InFlightRequestFailsWhenAWorkerDies) {
  auto driver = start(0, "driver_inflight");
  auto worker = start(1, "worker_inflight");
  ASSERT_TRUE(awaitHealth(200, 60s)) << driver->log();
  // The worker is stopped before the request goes out, so the request cannot finish before
  // the worker dies: its first step waits in the all-reduce for the stopped worker. Killed
  // well inside the liveness timeout (2 s), the worker is lost while the request is in flight.
  worker->signal(SIGSTOP);
  test::HttpResponse long_answer;
  std::thread client([&] { long_answer = complete(1900); });
  std::this_thread::sleep_for(500ms);
  worker->signal(SIGKILL);
  client.join();  // must come back (httpRequest times out after 30 s at most)
  EXPECT_EQ(long_answer.status, 503) << long_answer.body << "\n" << driver->log();
  EXPECT_NE(long_answer.body.find("error"), std::string::npos) << long_answer.body;
  driver->signal(SIGTERM);
  EXPECT_EQ(driver->wait(30s), 0) << driver->log();
}

TEST_F(ClusterFaultTest, LostDriverMakesWorkersExitNamingIt) {
  auto driver = start(0, "driver_lost");
  auto worker = start(1, "worker_lost");
  ASSERT_TRUE(awaitHealth(200, 60s)) << driver->log();
  driver->signal(SIGKILL);
  driver->wait(5s);
  int rc = worker->wait(15s);
  EXPECT_NE(rc, 0);
  EXPECT_NE(rc, -1) << "the worker did not exit in time:\n" << worker->log();
  EXPECT_NE(worker->log().find("node 0"), std::string::npos) << worker->log();
}

}  // namespace
}  // namespace tpnode::node
