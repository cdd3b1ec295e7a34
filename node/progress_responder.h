// ProgressResponder: a worker's answer to node 0's step watchdog (node/step_progress.h). The
// worker's main thread counts the step commands it receives and takes up; a thread of the
// responder answers node 0's progress probes with those counts while the main thread is busy
// (or stuck) in a step.
//
// Contract
// - One per worker session (ClusterSession), made once the mesh has formed; `mesh` outlives
//   it. The destructor stops and joins its thread (within ~50 ms).
// - noteReceived() and noteBegun() are called by the worker's main thread: noteReceived() when
//   a kStep, kReadTensor or kRetire command arrives, noteBegun() when its ranks start on it.
// - setTierTally() (the worker's main thread, when its ranks load) names this process's KV
//   tier counters (node/kv_tier_tally.h); a query of kind kTierCounters is answered with them
//   (no ranks before, or without the tier).
// - The thread only receives on kTagProgress from node 0 and sends on kTagProgressReport and
//   kTagTierReport to node 0. It ends when the link to node 0 fails or the mesh shuts down; a
//   malformed query (or one naming another node) fails node 0's links (Mesh::failPeer), as a
//   malformed frame does.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "mesh/mesh.h"
#include "node/kv_tier_tally.h"
#include "node/step_progress.h"

namespace tpnode::node {

class ProgressResponder {
 public:
  explicit ProgressResponder(mesh::Mesh& mesh);
  ~ProgressResponder();
  ProgressResponder(const ProgressResponder&) = delete;
  ProgressResponder& operator=(const ProgressResponder&) = delete;

  void noteReceived() { ++received_; }
  void noteBegun() { ++begun_; }
  void setTierTally(std::shared_ptr<const KvTierTally> tally);

 private:
  void loop();
  void handle(const ProgressQuery& query);

  mesh::Mesh& mesh_;  // the session's mesh; outlives this object
  std::atomic<uint64_t> received_{0};
  std::atomic<uint64_t> begun_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                         // guarded by mu_
  std::shared_ptr<const KvTierTally> tally_;  // guarded by mu_
  std::thread thread_;
};

}  // namespace tpnode::node
