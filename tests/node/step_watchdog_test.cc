// StepWatchdog against the in-process fake mesh: a step that outlasts the timeout makes the
// worker that stalled it lost (found by probing the workers' ProgressResponders: the one that
// did not take up the step, or does not answer; the others stay), a wait for one peer blames
// that peer, and a stall nobody can be blamed for makes every live peer lost once; steps that
// end in time, and steps while no mesh is watched, leave the peers alone.
#include "node/step_watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "node/progress_responder.h"
#include "tests/collectives/fake_mesh.h"

namespace tpnode::node {
namespace {

using namespace std::chrono_literals;

// A mesh that records the peers it is told to fail, and why.
class RecordingMesh final : public mesh::Mesh {
 public:
  explicit RecordingMesh(std::unique_ptr<mesh::Mesh> inner) : inner_(std::move(inner)) {}
  int nodeId() const override { return inner_->nodeId(); }
  int nodeCount() const override { return inner_->nodeCount(); }
  void send(int p, uint32_t tag, std::span<const std::byte> d) override { inner_->send(p, tag, d); }
  size_t recv(int p, uint32_t tag, std::span<std::byte> out) override {
    return inner_->recv(p, tag, out);
  }
  std::unique_ptr<mesh::Request> isend(int p, uint32_t tag, std::span<const std::byte> d) override {
    return inner_->isend(p, tag, d);
  }
  std::unique_ptr<mesh::Request> irecv(int p, uint32_t tag, std::span<std::byte> out) override {
    return inner_->irecv(p, tag, out);
  }
  void setEventCallback(std::function<void(const mesh::PeerEvent&)> cb) override {
    inner_->setEventCallback(std::move(cb));
  }
  bool peerAlive(int p) const override { return inner_->peerAlive(p); }
  void failPeer(int p, const std::string& reason) override {
    {
      std::lock_guard lock(mu_);
      failed_.push_back(p);
      reasons_ += reason + "\n";
    }
    inner_->failPeer(p, reason);
  }
  std::vector<mesh::LinkStats> linkStats(int rounds) override { return inner_->linkStats(rounds); }
  void shutdown() override { inner_->shutdown(); }

  std::vector<int> failed() const {
    std::lock_guard lock(mu_);
    return failed_;
  }
  std::string reasons() const {
    std::lock_guard lock(mu_);
    return reasons_;
  }

 private:
  std::unique_ptr<mesh::Mesh> inner_;
  mutable std::mutex mu_;
  std::vector<int> failed_;
  std::string reasons_;
};

// Node 0 and workers 1..nodes-1 (each with a ProgressResponder unless `silent` names it); every
// worker received one step command, and took it up unless `behind` names it.
struct Cluster {
  Cluster(int nodes, int behind, int silent = -1)
      : net(collectives::testing::FakeNetwork::create(nodes)), ledger(nodes) {
    node0 = std::make_unique<RecordingMesh>(net->mesh(0));
    node0->setEventCallback([this](const mesh::PeerEvent& e) {
      if (e.kind == mesh::PeerEventKind::kLost) ++lost;
    });
    for (int p = 1; p < nodes; ++p) {
      workers.push_back(std::make_unique<RecordingMesh>(net->mesh(p)));
      ledger.noteSent(p);
      if (p == silent) continue;
      responders.push_back(std::make_unique<ProgressResponder>(*workers.back()));
      responders.back()->noteReceived();
      if (p != behind) responders.back()->noteBegun();
    }
  }
  ~Cluster() { responders.clear(); }  // before the meshes

  // Waits (bounded) until `node` is lost.
  bool awaitLost(int node) {
    for (int i = 0; i < 500 && node0->peerAlive(node); ++i) std::this_thread::sleep_for(10ms);
    return !node0->peerAlive(node);
  }

  std::shared_ptr<collectives::testing::FakeNetwork> net;
  CommandLedger ledger;
  std::unique_ptr<RecordingMesh> node0;
  std::vector<std::unique_ptr<RecordingMesh>> workers;  // workers[p - 1] is node p
  std::vector<std::unique_ptr<ProgressResponder>> responders;
  std::atomic<int> lost{0};
};

TEST(StepWatchdogTest, OnlyTheWorkerThatDidNotTakeUpTheStepIsLost) {
  Cluster c(3, /*behind=*/2);
  StepWatchdog watchdog(200ms);
  watchdog.watch(c.node0.get(), &c.ledger);
  watchdog.begin();  // a step that never ends
  ASSERT_TRUE(c.awaitLost(2));
  std::this_thread::sleep_for(300ms);  // nothing else follows
  EXPECT_TRUE(c.node0->peerAlive(1));
  EXPECT_EQ(c.node0->failed(), std::vector<int>{2});
  EXPECT_NE(c.node0->reasons().find("node 2 did not answer a step within --step-timeout 0.2 s: "
                                    "it took up 0 of the 1 step commands sent to it"),
            std::string::npos)
      << c.node0->reasons();
  EXPECT_TRUE(c.workers[0]->failed().empty());  // node 1 blamed nobody either
  watchdog.watch(nullptr);
}

TEST(StepWatchdogTest, AWorkerThatDoesNotAnswerTheProbeIsLost) {
  Cluster c(3, /*behind=*/-1, /*silent=*/1);
  StepWatchdog watchdog(200ms);
  watchdog.watch(c.node0.get(), &c.ledger);
  watchdog.begin();
  ASSERT_TRUE(c.awaitLost(1));
  std::this_thread::sleep_for(300ms);
  EXPECT_TRUE(c.node0->peerAlive(2));
  EXPECT_NE(c.node0->reasons().find("it did not answer a progress probe within 0.5 s"),
            std::string::npos)
      << c.node0->reasons();
  EXPECT_EQ(c.node0->failed(), std::vector<int>{1});
  watchdog.watch(nullptr);
}

TEST(StepWatchdogTest, AWaitForOnePeerBlamesThatPeer) {
  Cluster c(3, /*behind=*/-1);
  StepWatchdog watchdog(200ms);
  watchdog.watch(c.node0.get(), &c.ledger);
  watchdog.begin(/*awaited_peer=*/1);
  ASSERT_TRUE(c.awaitLost(1));
  std::this_thread::sleep_for(300ms);
  EXPECT_TRUE(c.node0->peerAlive(2));
  EXPECT_NE(c.node0->reasons().find("it did not acknowledge"), std::string::npos);
  watchdog.watch(nullptr);
}

TEST(StepWatchdogTest, AStallInsideAStepEveryWorkerTookUpMakesEveryPeerLost) {
  Cluster c(3, /*behind=*/-1);
  StepWatchdog watchdog(200ms);
  watchdog.watch(c.node0.get(), &c.ledger);
  watchdog.begin();
  ASSERT_TRUE(c.awaitLost(1));
  ASSERT_TRUE(c.awaitLost(2));
  EXPECT_NE(c.node0->reasons().find("node 0 could not tell which"), std::string::npos)
      << c.node0->reasons();
  watchdog.watch(nullptr);
}

TEST(StepWatchdogTest, WithoutALedgerAStepPastTheTimeoutMakesThePeersLost) {
  auto net = collectives::testing::FakeNetwork::create(3);
  auto node0 = net->mesh(0);
  std::atomic<int> lost{0};
  node0->setEventCallback([&](const mesh::PeerEvent& e) {
    if (e.kind == mesh::PeerEventKind::kLost) ++lost;
  });
  StepWatchdog watchdog(200ms);
  watchdog.watch(node0.get());
  for (int i = 0; i < 5; ++i) {  // steps that end in time
    StepWatchdog::Scope step(watchdog);
    std::this_thread::sleep_for(20ms);
  }
  std::this_thread::sleep_for(300ms);  // idle between steps is not a stall
  EXPECT_TRUE(node0->peerAlive(1) && node0->peerAlive(2));
  watchdog.begin();  // a step that never ends
  for (int i = 0; i < 200 && (node0->peerAlive(1) || node0->peerAlive(2)); ++i) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_FALSE(node0->peerAlive(1));
  EXPECT_FALSE(node0->peerAlive(2));
  EXPECT_GE(lost.load(), 2);
  watchdog.watch(nullptr);
}

TEST(StepWatchdogTest, NothingHappensWithoutAMeshOrWithTimeoutZero) {
  auto net = collectives::testing::FakeNetwork::create(2);
  auto node0 = net->mesh(0);
  {
    StepWatchdog watchdog(50ms);
    watchdog.begin();  // no mesh watched
    std::this_thread::sleep_for(200ms);
  }
  {
    StepWatchdog off(0ms);
    off.watch(node0.get());
    off.begin();
    std::this_thread::sleep_for(100ms);
    off.watch(nullptr);
  }
  EXPECT_TRUE(node0->peerAlive(1));
}

}  // namespace
}  // namespace tpnode::node
