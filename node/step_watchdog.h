// StepWatchdog: progress, not just liveness. A node that keeps its links alive (heartbeats) but
// never answers a step would stall node 0 forever; the mesh's liveness cannot see it. The driver
// marks when each step (or tensor read) begins and ends; one that has not ended `timeout` after
// it began makes the watchdog declare every peer still alive lost (Mesh::failPeer, reason naming
// --step-timeout). The step then fails as with a dead peer: in-flight requests get 503 and the
// driver re-forms the cluster; nodes that still work see node 0 go and rejoin by themselves.
//
// Contract
// - One driver loop thread calls watch(), begin() and end(); the watchdog has its own thread
//   (only when timeout > 0), which never blocks on the driver.
// - watch(mesh) after the mesh formed, watch(nullptr) before it is destroyed: once watch()
//   returns, the watchdog no longer touches the previous mesh.
// - A stalled step is reported once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "mesh/mesh.h"

namespace tpnode::node {

class StepWatchdog {
 public:
  explicit StepWatchdog(std::chrono::milliseconds timeout);
  ~StepWatchdog();
  StepWatchdog(const StepWatchdog&) = delete;
  StepWatchdog& operator=(const StepWatchdog&) = delete;

  void watch(mesh::Mesh* mesh);
  void begin();
  void end();

  // Marks one step from construction to destruction.
  class Scope {
   public:
    explicit Scope(StepWatchdog& w) : w_(w) { w_.begin(); }
    ~Scope() { w_.end(); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    StepWatchdog& w_;
  };

 private:
  using Clock = std::chrono::steady_clock;
  void loop();

  const std::chrono::milliseconds timeout_;
  std::atomic<int64_t> began_ns_{0};  // steady clock ns of the step in progress; 0: none
  std::mutex mu_;
  std::condition_variable cv_;
  mesh::Mesh* mesh_ = nullptr;  // guarded by mu_
  bool stop_ = false;           // guarded by mu_
  std::thread thread_;
};

}  // namespace tpnode::node
