// Faults of a running cluster, with real processes on loopback: a killed worker is noticed
// within the liveness timeout, in-flight and new requests fail with 503 (never hang), the
// worker restarted rejoins and serving resumes without restarting node 0; a lost driver makes
// workers exit non-zero naming it; SIGTERM on node 0 stops the whole cluster with exit 0.
#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "tests/model/reference_data.h"
#include "tests/support/serving_cluster.h"

namespace tpnode::node {
namespace {

using namespace std::chrono_literals;
using testing_support::ServingCluster;

class ClusterFaultTest : public ::testing::Test {
 protected:
  // Two nodes; neither is started yet.
  static ServingCluster cluster(const std::string& tag) {
    return ServingCluster({.model = testing_support::referenceModel("llama-tiny-q8_0"),
                           .nodes = 2,
                           .args = {"--tp", "1", "--liveness-timeout", "2", "--connect-timeout",
                                    "60", "--parallel", "2", "--ctx-size", "2048"},
                           .tag = "fault_" + tag});
  }

  static test::HttpResponse complete(const ServingCluster& c, int max_tokens) {
    return c.complete({{"prompt", "Hello world"},
                       {"max_tokens", max_tokens},
                       {"temperature", 0},
                       {"ignore_eos", true}},
                      30);
  }
};

TEST_F(ClusterFaultTest, KilledWorkerIsReportedAndRejoins) {
  ServingCluster c = cluster("killed");
  c.start(0);
  c.start(1);
  ASSERT_TRUE(c.awaitHealth(200, 60s)) << c.node(0).log();
  auto first = complete(c, 4);
  ASSERT_EQ(first.status, 200) << first.body;

  c.node(1).signal(SIGKILL);
  c.node(1).wait(5s);
  auto killed_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(c.awaitHealth(503, 10s)) << c.node(0).log();
  double detect_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  EXPECT_LT(detect_s, 2.0 + 3.0) << "liveness timeout is 2 s";
  auto during = complete(c, 4);
  EXPECT_EQ(during.status, 503) << during.body;

  c.start(1, {}, "again");
  ASSERT_TRUE(c.awaitHealth(200, 30s)) << c.node(0).log();
  auto after = complete(c, 4);
  EXPECT_EQ(after.status, 200) << after.body;
  EXPECT_NE(after.body.find("\"text\""), std::string::npos) << after.body;

  c.expectCleanShutdown();  // node 0 by SIGTERM, the restarted worker by node 0: both exit 0
}

TEST_F(ClusterFaultTest, InFlightRequestFailsWhenAWorkerDies) {
  ServingCluster c = cluster("inflight");
  c.start(0);
  c.start(1);
  ASSERT_TRUE(c.awaitHealth(200, 60s)) << c.node(0).log();
  // The worker is stopped before the request goes out, so the request cannot finish before
  // the worker dies: its first step waits in the all-reduce for the stopped worker. Killed
  // well inside the liveness timeout (2 s), the worker is lost while the request is in flight.
  c.node(1).signal(SIGSTOP);
  test::HttpResponse long_answer;
  std::thread client([&] { long_answer = complete(c, 1900); });
  std::this_thread::sleep_for(500ms);
  c.node(1).signal(SIGKILL);
  client.join();  // must come back (httpRequest times out after 30 s at most)
  EXPECT_EQ(long_answer.status, 503) << long_answer.body << "\n" << c.node(0).log();
  EXPECT_NE(long_answer.body.find("error"), std::string::npos) << long_answer.body;
  c.node(0).signal(SIGTERM);
  EXPECT_EQ(c.node(0).wait(30s), 0) << c.node(0).log();
}

TEST_F(ClusterFaultTest, LostDriverMakesWorkersExitNamingIt) {
  ServingCluster c = cluster("lost");
  c.start(0);
  c.start(1);
  ASSERT_TRUE(c.awaitHealth(200, 60s)) << c.node(0).log();
  c.node(0).signal(SIGKILL);
  c.node(0).wait(5s);
  int rc = c.node(1).wait(15s);
  EXPECT_NE(rc, 0);
  EXPECT_NE(rc, -1) << "the worker did not exit in time:\n" << c.node(1).log();
  EXPECT_NE(c.node(1).log().find("node 0"), std::string::npos) << c.node(1).log();
}

}  // namespace
}  // namespace tpnode::node
