// StepWatchdog: progress, not just liveness. A node that keeps its links alive (heartbeats) but
// never answers a step would stall node 0 forever; the mesh's liveness cannot see it. The driver
// marks when each step (or tensor read, or awaited acknowledgement) begins and ends; one that
// has not ended `timeout` after it began makes the watchdog find the node that stalled it and
// declare that node lost (Mesh::failPeer, the reason naming --step-timeout and the node):
// - a wait for one named peer (begin(peer): an acknowledgement) blames that peer;
// - otherwise node 0 probes every live worker (node/stall_probe.h): a worker that took up
//   fewer step commands than node 0 sent it, or that does not answer within the probe window,
//   stalled the step. The other workers are not declared lost: node 0's aborted collectives
//   end theirs (collectives/hierarchical.h), they stay connected to node 0 and re-form when
//   the driver resets them;
// - when no worker is behind (the stall is inside a step every node took up, or the session
//   has no CommandLedger), it cannot tell the nodes apart: it says so in the log and declares
//   every live peer lost, as before.
// The step then fails as with a dead peer: in-flight requests get 503 and the driver re-forms
// the cluster; the node declared lost sees node 0 go and rejoins by itself once it works.
// Nothing is sent while steps finish in time.
//
// Contract
// - One driver loop thread calls watch(), begin() and end(); the watchdog has its own thread
//   (only when timeout > 0), which never blocks on the driver.
// - watch(mesh, ledger) after the mesh formed, watch(nullptr) before it is destroyed: once
//   watch() returns, the watchdog no longer touches the previous mesh or ledger (watch() waits
//   for a probe in progress, at most the probe window: clamp(timeout / 2, 0.5 s, 5 s)).
// - A stalled step is reported once. A step that ends while its peers are being probed
//   declares nobody lost; nor does a probe during which a peer was lost (the mesh reports that
//   one) and that finds the others up to date.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "mesh/mesh.h"
#include "node/stall_probe.h"

namespace tpnode::node {

class StepWatchdog {
 public:
  explicit StepWatchdog(std::chrono::milliseconds timeout);
  ~StepWatchdog();
  StepWatchdog(const StepWatchdog&) = delete;
  StepWatchdog& operator=(const StepWatchdog&) = delete;

  // `ledger` (may be null: then a stall blames every peer) stays valid until the next watch().
  void watch(mesh::Mesh* mesh, const CommandLedger* ledger = nullptr);
  // `awaited_peer` >= 1: the step waits for that peer alone (it is blamed on a timeout).
  void begin(int awaited_peer = -1);
  void end();

  // Marks one step from construction to destruction.
  class Scope {
   public:
    explicit Scope(StepWatchdog& w, int awaited_peer = -1) : w_(w) { w_.begin(awaited_peer); }
    ~Scope() { w_.end(); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    StepWatchdog& w_;
  };

 private:
  using Clock = std::chrono::steady_clock;
  void loop();
  // The step `step` outlasted the timeout: blame and fail (mu_ held).
  void onStall(uint64_t step, int awaited_peer);
  int livePeers() const;  // of mesh_ (mu_ held)

  const std::chrono::milliseconds timeout_;
  std::atomic<int64_t> began_ns_{0};  // steady clock ns of the step in progress; 0: none
  std::atomic<uint64_t> began_{0};    // steps begun
  std::atomic<uint64_t> ended_{0};    // the number of the last step ended
  std::atomic<int> awaited_peer_{-1};
  std::mutex mu_;
  std::condition_variable cv_;
  mesh::Mesh* mesh_ = nullptr;             // guarded by mu_
  const CommandLedger* ledger_ = nullptr;  // guarded by mu_
  uint32_t probes_ = 0;                    // guarded by mu_
  bool stop_ = false;                      // guarded by mu_
  std::thread thread_;
};

}  // namespace tpnode::node
