// TierCounterPoll: node 0's side of the workers' Redis KV tier counter reports
// (node/step_progress.h, kind kTierCounters): about once every `interval` it asks every live
// worker for its ranks' counters and takes the reports that came back, never waiting for one,
// so that node 0's /metrics counts the blocks every rank of the cluster stored and dropped.
//
// Contract
// - One per session (mesh), on node 0; `mesh` outlives it. poll() is called from one thread
//   (the Driver's loop, between steps) and never blocks beyond handing 16-byte queries to the
//   sockets. The destructor cancels the receives still posted.
// - A report is taken only from the worker it names and only with ranks of that worker
//   (`ranks_of(node)` gives the first global rank and the count); a malformed or foreign one
//   is dropped (logged at most once per few seconds), and the next poll asks again.
// - A worker that fails is skipped (the mesh reports why); its last report stays with the
//   caller.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "common/log.h"
#include "mesh/mesh.h"
#include "node/step_progress.h"

namespace tpnode::node {

class TierCounterPoll {
 public:
  // (first global rank, count) of the ranks on `node`.
  using RanksOf = std::function<std::pair<uint32_t, uint32_t>(int node)>;

  TierCounterPoll(mesh::Mesh& mesh, RanksOf ranks_of, std::chrono::milliseconds interval);
  ~TierCounterPoll();
  TierCounterPoll(const TierCounterPoll&) = delete;
  TierCounterPoll& operator=(const TierCounterPoll&) = delete;

  // Sends the queries when they are due; returns the reports that arrived since the last call.
  std::vector<TierReport> poll();

 private:
  struct Peer {
    int node = 0;
    std::vector<std::byte> buffer;         // kMaxTierReportBytes
    std::unique_ptr<mesh::Request> reply;  // posted receive; null once the link failed
  };
  void take(Peer& peer, std::vector<TierReport>& out);

  mesh::Mesh& mesh_;  // the session's mesh; outlives this object
  const RanksOf ranks_of_;
  const std::chrono::milliseconds interval_;
  std::chrono::steady_clock::time_point next_query_{};
  uint32_t probe_ = 0;
  std::vector<Peer> peers_;
  LogLimiter log_;
};

}  // namespace tpnode::node
