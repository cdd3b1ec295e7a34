// Node 0's side of the step progress messages (node/step_progress.h): which worker stalled a
// step that outlasted --step-timeout. The ClusterSession counts, per worker, the step commands
// it sent (CommandLedger); findStalledPeers() asks every live worker how many it took up and
// names those behind, or silent.
//
// Contract
// - CommandLedger: noteSent() and await*() from the thread that sends the commands (the
//   Driver's loop), sent() and awaited() from any thread (the watchdog's); one ledger per
//   session (mesh).
// - Steps in flight (a pipeline split): node 0 may have sent a worker commands it does not
//   wait on yet (a later stage still runs an earlier step). The driver says, before each
//   wait, how many commands each worker must have taken up for the wait to end (awaitUpTo(),
//   from a snapshot() taken when the awaited step went out); awaitAll() (the default) waits
//   on every command sent. A worker is blamed only when it is behind what node 0 waits on.
// - findStalledPeers() runs on the StepWatchdog's thread, at most one probe
//   at a time per mesh (replies are matched by the probe number; stale ones are skipped). They
//   block at most about `window` plus the time to hand the small queries to the sockets, and
//   never throw for a peer that fails meanwhile (a lost peer is left to the mesh's report).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "mesh/mesh.h"

namespace tpnode::node {

class CommandLedger {
 public:
  static constexpr uint64_t kAll = UINT64_MAX;  // awaitUpTo(): every command sent

  explicit CommandLedger(int nodes)
      : nodes_(nodes),
        sent_(std::make_unique<std::atomic<uint64_t>[]>(static_cast<size_t>(nodes))),
        awaited_(std::make_unique<std::atomic<uint64_t>[]>(static_cast<size_t>(nodes))) {
    awaitAll();
  }
  // Call before the command is handed to the mesh: a send that blocks still counts.
  void noteSent(int peer) { ++sent_[static_cast<size_t>(peer)]; }
  uint64_t sent(int peer) const { return sent_[static_cast<size_t>(peer)].load(); }
  int nodes() const { return nodes_; }

  // Commands sent so far, per node (index = node; node 0's entry is 0).
  std::vector<uint64_t> snapshot() const;
  // Node 0 now waits on every command sent.
  void awaitAll();
  // Node 0 now waits on the first counts[p] commands of each node p (kAll: every one).
  void awaitUpTo(std::span<const uint64_t> counts);
  // The commands node 0 waits on `peer` to have taken up (at most those sent).
  uint64_t awaited(int peer) const;

 private:
  const int nodes_;
  std::unique_ptr<std::atomic<uint64_t>[]> sent_;
  std::unique_ptr<std::atomic<uint64_t>[]> awaited_;
};

struct StalledPeer {
  int node = -1;
  std::string why;  // "it took up 2 of the 3 step commands sent to it (3 received)"
};

// Probes every live worker (nodes 1..N-1) with probe number `probe` and waits up to `window`
// for the reports. Returns the workers that took up fewer commands than `ledger` says node 0
// waits on (CommandLedger::awaited), or that did not answer; empty when every live worker is up to
// date (the stall, if any, is inside the step, or on node 0).
std::vector<StalledPeer> findStalledPeers(mesh::Mesh& mesh, const CommandLedger& ledger,
                                          uint32_t probe, std::chrono::milliseconds window);

}  // namespace tpnode::node
