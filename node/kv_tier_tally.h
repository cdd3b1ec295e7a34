// KvTierTally: the Redis KV tier's counters of every rank of this process (node/kv_tier_rank.h),
// kept for the life of the process, across cluster sessions, so that they only grow. Node 0
// reads its own ranks' tally for /metrics; a worker's ProgressResponder reads it to answer
// node 0's tier counter queries (node/step_progress.h), so that node 0's /metrics shows every
// rank of the cluster.
//
// Contract
// - Thread-safe. cell() hands out a counter cell per global rank, made on first use; a cell
//   stays valid (same address) for the tally's life, so a RankKvTier holds the tally (shared)
//   and a reference to its cell. The cells' counters are atomic (relaxed: they are figures, not
//   synchronization).
// - snapshot() reads every cell, by global rank ascending.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace tpnode::node {

struct KvTierCounters {
  uint64_t stored = 0;         // blocks written to Redis
  uint64_t store_dropped = 0;  // blocks not written: the queue was full, or the SET failed
  uint64_t fetched = 0;        // blocks read from Redis and imported
  uint64_t fetch_failed = 0;   // blocks asked for and not imported (missing, down, damaged)
  KvTierCounters& operator+=(const KvTierCounters& o);
};

// One rank's counters as read at one moment.
struct RankTierCounters {
  uint32_t rank = 0;  // global rank
  KvTierCounters counters;
};

class KvTierTally {
 public:
  struct Cell {
    std::atomic<uint64_t> stored{0}, store_dropped{0}, fetched{0}, fetch_failed{0};
    KvTierCounters read() const;
  };

  Cell& cell(uint32_t global_rank);
  std::vector<RankTierCounters> snapshot() const;

 private:
  mutable std::mutex mu_;
  std::map<uint32_t, std::unique_ptr<Cell>> cells_;  // guarded by mu_
};

}  // namespace tpnode::node
