// StepWatchdog against the in-process fake mesh: a step that outlasts the timeout makes every
// live peer lost once (with the reason naming --step-timeout); steps that end in time, and
// steps while no mesh is watched, leave the peers alone.
#include "node/step_watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

#include "tests/collectives/fake_mesh.h"

namespace tpnode::node {
namespace {

using namespace std::chrono_literals;

TEST(StepWatchdogTest, AStepPastTheTimeoutMakesThePeersLost) {
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
