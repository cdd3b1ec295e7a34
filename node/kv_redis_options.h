// The Redis KV tier's settings as KvBlockStoreOptions (node/redis/kv_block_store.h):
// --kv-cache-redis-url, --kv-cache-redis-ttl, --redis-timeout.
//
// Contract: a pure function of the options. nullopt when no URL is set (no Redis tier);
// Error(kInvalidArgument) naming the flag for a bad URL, TTL or timeout, so that a node refuses
// to start rather than run without the tier it was asked for. Each rank then builds its own
// KvBlockStore(scope, global_rank, options) with the cluster's KvBlockScope (model identity,
// layout, stages, block tokens, cache format) and `max_block_bytes` set to its block's size.
#pragma once

#include <optional>

#include "node/options.h"
#include "node/redis/kv_block_store.h"

namespace tpnode::node {

std::optional<redis::KvBlockStoreOptions> kvBlockStoreOptionsFrom(const Options& options);

// The paged KV cache (node/kv_blocks.h) does not store blocks in or load them from the tier yet:
// a node given --kv-cache-redis-url refuses to start (Error(kUnsupported) naming the flag, after
// the URL, TTL and timeout are checked as above) rather than run without the sharing it was
// asked for. A no-op without the flag.
void refuseKvRedisTier(const Options& options);

}  // namespace tpnode::node
