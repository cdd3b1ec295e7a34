#include "node/step_watchdog.h"

#include <algorithm>
#include <string>

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

void StepWatchdog::watch(mesh::Mesh* mesh) {
  std::lock_guard lock(mu_);
  mesh_ = mesh;
  began_ns_.store(0);
}

void StepWatchdog::begin() {
  began_ns_.store(nowNs());
}

void StepWatchdog::end() {
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
    const double elapsed_s = static_cast<double>(nowNs() - began) / 1e9;
    const double limit_s = static_cast<double>(timeout_.count()) / 1e3;
    if (elapsed_s < limit_s) continue;
    int64_t expected = began;
    began_ns_.compare_exchange_strong(expected, 0);  // report this step once
    const std::string reason = fmt::format(
        "a step did not complete within --step-timeout {:.1f} s (a node keeps its connection "
        "alive but does not answer)",
        limit_s);
    spdlog::error("[driver] {}; declaring the peers lost and re-forming the cluster", reason);
    for (int p = 0; p < mesh_->nodeCount(); ++p) {
      if (p != mesh_->nodeId() && mesh_->peerAlive(p)) mesh_->failPeer(p, reason);
    }
  }
}

}  // namespace tpnode::node
