#include "node/step_watchdog.h"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace tpnode::node {
namespace {

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

StepWatchdog::StepWatchdog(std::chrono::milliseconds timeout) : timeout_(timeout) {
  if (timeout_.count() > 0) thread_ = std::thread([this] { loop(); });
}

StepWatchdog::~StepWatchdog() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StepWatchdog::watch(mesh::Mesh* mesh, const CommandLedger* ledger) {
  std::lock_guard lock(mu_);
  mesh_ = mesh;
  ledger_ = mesh != nullptr ? ledger : nullptr;
  began_ns_.store(0);
}

void StepWatchdog::begin(int awaited_peer) {
  awaited_peer_.store(awaited_peer);
  ++began_;
  began_ns_.store(nowNs());
}

void StepWatchdog::end() {
  ended_.store(began_.load());
  began_ns_.store(0);
}

void StepWatchdog::loop() {
  const auto tick =
      std::clamp(timeout_ / 10, std::chrono::milliseconds(20), std::chrono::milliseconds(500));
  std::unique_lock lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, tick, [this] { return stop_; });
    const int64_t began = began_ns_.load();
    if (stop_ || mesh_ == nullptr || began == 0) continue;
    if (nowNs() - began < std::chrono::nanoseconds(timeout_).count()) continue;
    const uint64_t step = began_.load();
    const int awaited = awaited_peer_.load();
    int64_t expected = began;
    if (!began_ns_.compare_exchange_strong(expected, 0)) continue;  // ended: report once
    onStall(step, awaited);
  }
}

int StepWatchdog::livePeers() const {
  int alive = 0;
  for (int p = 0; p < mesh_->nodeCount(); ++p) alive += p != mesh_->nodeId() && mesh_->peerAlive(p);
  return alive;
}

void StepWatchdog::onStall(uint64_t step, int awaited) {
  const double limit_s = static_cast<double>(timeout_.count()) / 1e3;
  std::vector<StalledPeer> stalled;
  if (awaited > 0) {
    if (awaited >= mesh_->nodeCount() || !mesh_->peerAlive(awaited)) return;
    stalled.push_back({awaited, "it did not acknowledge node 0's command"});
  } else if (ledger_ != nullptr) {
    const auto window = std::clamp<std::chrono::milliseconds>(
        timeout_ / 2, std::chrono::milliseconds(500), std::chrono::seconds(5));
    const int alive_before = livePeers();
    stalled = findStalledPeers(*mesh_, *ledger_, ++probes_, window);
    if (ended_.load() >= step) {
      spdlog::warn(
          "[driver] a step outlasted --step-timeout {:.1f} s but ended while node 0 probed its "
          "nodes; no node is declared lost",
          limit_s);
      return;
    }
    if (stalled.empty() && livePeers() < alive_before) {
      spdlog::warn(
          "[driver] a step outlasted --step-timeout {:.1f} s; a node was lost while node 0 "
          "probed the others, which are up to date: no other node is declared lost",
          limit_s);
      return;
    }
  }
  if (stalled.empty()) {
    spdlog::error(
        "[driver] a step did not complete within --step-timeout {:.1f} s and node 0 cannot tell "
        "which node stalled it ({}); declaring every peer lost and re-forming the cluster",
        limit_s,
        ledger_ != nullptr ? "every worker took up the step: the stall is inside it"
                           : "no progress is recorded for this mesh");
    const std::string reason = fmt::format(
        "a step did not complete within --step-timeout {:.1f} s (a node keeps its connection "
        "alive but does not answer; node 0 could not tell which)",
        limit_s);
    for (int p = 0; p < mesh_->nodeCount(); ++p) {
      if (p != mesh_->nodeId() && mesh_->peerAlive(p)) mesh_->failPeer(p, reason);
    }
    return;
  }
  int others = 0;  // live workers that keep their place
  for (int p = 1; p < mesh_->nodeCount(); ++p) {
    others +=
        mesh_->peerAlive(p) && std::none_of(stalled.begin(), stalled.end(),
                                            [p](const StalledPeer& s) { return s.node == p; });
  }
  for (const StalledPeer& s : stalled) {
    const std::string reason = fmt::format(
        "node {} did not answer a step within --step-timeout {:.1f} s: {}", s.node, limit_s, s.why);
    spdlog::error("[driver] {}; declaring node {} lost{}", reason, s.node,
                  others > 0 ? fmt::format(" ({} other node(s) stay and re-form)", others) : "");
    mesh_->failPeer(s.node, reason);
  }
}

}  // namespace tpnode::node
