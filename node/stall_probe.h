// Node 0's side of the step progress messages (node/step_progress.h): which worker stalled a
// step that outlasted --step-timeout. The ClusterSession counts, per worker, the step commands
// it sent (CommandLedger); findStalledPeers() asks every live worker how many it took up and
// names those behind, or silent.
//
// Contract
// - CommandLedger: noteSent() from the thread that sends the commands (the Driver's loop),
//   sent() from any thread (the watchdog's); one ledger per session (mesh).
// - findStalledPeers() runs on the StepWatchdog's thread, at most one probe
//   at a time per mesh (replies are matched by the probe number; stale ones are skipped). They
//   block at most about `window` plus the time to hand the small queries to the sockets, and
//   never throw for a peer that fails meanwhile (a lost peer is left to the mesh's report).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mesh/mesh.h"

namespace tpnode::node {

class CommandLedger {
 public:
  explicit CommandLedger(int nodes)
      : nodes_(nodes),
        sent_(std::make_unique<std::atomic<uint64_t>[]>(static_cast<size_t>(nodes))) {}
  // Call before the command is handed to the mesh: a send that blocks still counts.
  void noteSent(int peer) { ++sent_[static_cast<size_t>(peer)]; }
  uint64_t sent(int peer) const { return sent_[static_cast<size_t>(peer)].load(); }
  int nodes() const { return nodes_; }

 private:
  const int nodes_;
  std::unique_ptr<std::atomic<uint64_t>[]> sent_;
};

struct StalledPeer {
  int node = -1;
  std::string why;  // "it took up 2 of the 3 step commands sent to it (3 received)"
};

// Probes every live worker (nodes 1..N-1) with probe number `probe` and waits up to `window`
// for the reports. Returns the workers that took up fewer commands than `ledger` says were
// sent to them, or that did not answer; empty when every live worker is up to date (the
// stall, if any, is inside the step, or on node 0).
std::vector<StalledPeer> findStalledPeers(mesh::Mesh& mesh, const CommandLedger& ledger,
                                          uint32_t probe, std::chrono::milliseconds window);

}  // namespace tpnode::node
