// RankKvTier: one rank's side of the KV tier shared in Redis (--kv-cache-redis-url). Node 0
// decides which blocks to store and to load and sends the same kKvTier command to every node
// (node/step_command.h); each rank then stores and loads its own shard of those blocks
// (node/redis/kv_block_store.h), so the bytes never pass through node 0.
//
// Contract
// - Owned by one rank (RankSet); store() and load() are called on the rank's thread between
//   steps, with the rank's paged cache (model::KvBlockIo: CPU or GPU).
// - store() copies each block's shard out of the cache at once (the block may be reused by the
//   next step) and queues it for the rank's writer thread, which SETs it with the TTL. The queue
//   holds at most `queue_blocks` blocks: a block that finds it full is dropped and counted
//   (store_dropped), never waited for. A failed SET (Redis down, slow) is counted and dropped.
// - load() GETs the blocks, 32 to a round trip (each bounded by the store's timeout; at once
//   while the client backs off after a failure) and imports each value that is a valid block
//   of this rank's scope and of this cache's block size (received bytes are hostile:
//   redis::decodeKvBlock checks the header, length and checksum; the payload size is checked
//   here). It returns 1 for each block imported and 0 for each that was not; it never throws
//   for Redis trouble. The caller (RankSet) all-reduces the flags so that every rank agrees.
// - Its counters live in options.tally (node/kv_tier_tally.h; a tally of its own when that is
//   null): the cell of its global rank, which outlives it, so that they keep counting across
//   sessions.
// - The destructor stops the writer (blocks still queued are dropped).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "common/bounded_queue.h"
#include "model/kv_cache.h"
#include "node/kv_tier_tally.h"
#include "node/redis/kv_block_store.h"
#include "node/step_command.h"

namespace tpnode::node {

// Payload bytes format of the tier: the rank's KvCache::exportBlock floats (f32, host order).
inline constexpr const char* kKvTierFormat = "f32";
// GPU ranks' blocks (the same layout): their rows differ from the CPU ranks' by the CPU's Q8
// activation rounding, so the two kinds of cluster never share entries.
inline constexpr const char* kKvTierFormatGpu = "f32-cuda";

struct KvTierOptions {
  redis::KvBlockStoreOptions store;
  redis::KvBlockScope scope;
  size_t queue_blocks = 64;  // blocks a rank's writer queue holds at most
  // The process's counters of every rank (shared by the options' copies); may be null.
  std::shared_ptr<KvTierTally> tally;
};

class RankKvTier {
 public:
  RankKvTier(const KvTierOptions& options, int global_rank, size_t block_floats);
  ~RankKvTier();
  RankKvTier(const RankKvTier&) = delete;
  RankKvTier& operator=(const RankKvTier&) = delete;

  void store(const model::KvBlockIo& cache, std::span<const KvTierBlock> blocks);
  std::vector<float> load(model::KvBlockIo& cache, std::span<const KvTierBlock> blocks);
  KvTierCounters counters() const;

 private:
  struct Entry {
    uint64_t hash = 0;
    std::vector<float> floats;
  };
  void writerLoop();

  const size_t block_floats_;
  redis::KvBlockStore reader_;  // the rank's thread
  redis::KvBlockStore writer_;  // the writer thread (its own connection: loads never wait on it)
  BoundedQueue<Entry> queue_;   // the rank's thread -> the writer thread
  const std::shared_ptr<KvTierTally> tally_;
  KvTierTally::Cell& counts_;  // in *tally_, which this object holds
  std::thread thread_;         // last: starts after everything it uses
};

}  // namespace tpnode::node
