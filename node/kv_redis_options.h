// The Redis KV tier's settings (--kv-cache-redis-url, --kv-cache-redis-ttl, --redis-timeout):
// the store's options, the cluster's scope, the combinations that run it, and node 0's lookup.
//
// Contract: kvBlockStoreOptionsFrom() and kvTierOptionsFrom() are pure functions of the
// options (and the loaded model; kvTierOptionsFrom() adds a fresh KvTierTally for the
// process's ranks): nullopt when no URL is set (no Redis tier);
// Error(kInvalidArgument) naming the flag for a bad URL, TTL or timeout, so that a node refuses
// to start rather than run without the tier it was asked for. Each rank then builds its own
// store (node/kv_tier_rank.h) with the cluster's scope and its global rank.
#pragma once

#include <optional>

#include "node/kv_tier_rank.h"
#include "node/loaded_model.h"
#include "node/options.h"
#include "node/redis/kv_block_store.h"
#include "node/scheduler.h"

namespace tpnode::node {

std::optional<redis::KvBlockStoreOptions> kvBlockStoreOptionsFrom(const Options& options);

// The scope (model identity, layout, stages and the layers of each, block size, the ranks'
// cache format: GPU ranks' blocks are kept apart from CPU ranks') with the store's options.
// `model` holds the stages this node runs (under --split auto, those node 0 chose: a worker
// that loads other stages makes its options again).
std::optional<KvTierOptions> kvTierOptionsFrom(const Options& options, const LoadedModel& model,
                                               bool gpu);

// The combinations the tier does not run, refused at startup with Error(kUnsupported) naming
// the flags (after the URL, TTL and timeout are checked as above): --prefix-cache off. CPU and
// GPU ranks, pipeline stages (--pp, --split pipeline/auto) run it. A no-op without the flag.
void refuseKvRedisTier(const Options& options);

// Node 0's lookup (node/scheduler.h): EXISTS of global rank 0's keys, one round trip bounded
// by the timeout, on a connection of its own. Every rank stores its shard of the same blocks,
// so rank 0's keys (stage 0's first rank in a pipeline split) stand for the cluster's; a rank
// that misses one is found at load time.
class RedisTierLookup final : public KvTierLookup {
 public:
  explicit RedisTierLookup(const KvTierOptions& options)
      : store_(options.scope, /*rank=*/0, options.store) {}
  size_t present(std::span<const uint64_t> hashes) override { return store_.countPresent(hashes); }

 private:
  redis::KvBlockStore store_;
};

}  // namespace tpnode::node
