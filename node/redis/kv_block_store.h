// KvBlockStore: one rank's view of the KV blocks shared in Redis (--kv-cache-redis-url): the
// rank stores the bytes of its own shard of a block under the block's hash and loads them back,
// so that another cluster serving the same model with the same layout skips recomputing a
// prefix. The bytes never pass through node 0.
//
// Keys (kvBlockKey): "tpnode:kv:1:<scope>:r<rank>:<block hash>", where <scope> is 16 hex digits
// of the SHA-256 of everything that decides a shard's bytes (KvBlockScope: the model identity,
// the layout, the pipeline stages and the layers of each, tokens per block, the cache format),
// <rank> is the global rank (unique across pipeline stages) and the block hash is 16 hex
// digits. A cluster with another model, layout, split or block format computes other keys and
// never reads these entries.
//
// Value (defined here and in docs/cluster.md, "KV blocks in Redis"): a 48-byte header, then the
// payload; integers little-endian:
//   0  magic "TPKV"        4  version u16 (1)    6  reserved u16 (0)   8  rank u32
//   12 reserved u32 (0)    16 scope digest, 8 bytes (the first 8 of the SHA-256 above)
//   24 block hash u64      32 payload bytes u64  40 FNV-1a 64 of the payload
// A value whose header does not match the key it was read from, whose length disagrees or
// whose checksum fails is refused (counted as an error, answered as a miss): received bytes
// are hostile.
//
// Contract
// - A KvBlockStore belongs to one rank; its calls are thread-safe (one Redis connection,
//   serialized) but meant for that rank's thread.
// - put()/get() never throw for Redis trouble: Redis down, slow (each call bounded by the
//   timeout; after a failure calls fail at once until the reconnect backoff passes) or
//   answering garbage is counted in errors and reported as false / nullopt, and the caller
//   recomputes the block. They throw Error(kInvalidArgument) only for a caller's mistake (a
//   block larger than max_block_bytes).
// - After a call that failed for Redis trouble (down, slow, a malformed reply), the store does
//   not call Redis for `pause_after_failure` (5 s): calls during the pause fail at once (counted
//   in errors), so a slow Redis costs one timeout per pause, not one per block or request. A
//   damaged value is a miss and does not pause.
// - Entries expire after `ttl` (Redis EX); each put refreshes it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "collectives/layout.h"
#include "node/redis/redis_client.h"

namespace tpnode::node::redis {

// What decides the bytes of one rank's shard of a KV block.
struct KvBlockScope {
  std::string model_identity;  // model::modelIdentity(file)
  collectives::Layout layout;  // ranks of every node (--tp / --tp-layout)
  int pp_stages = 1;           // --pp
  // The layers of every pipeline stage, first-last as --pp-layers spells them ("0-11,12-23");
  // empty without stages.
  std::string stage_layers;
  int block_tokens = 0;      // tokens per block
  std::string cache_format;  // e.g. "f16": the element type and order of the stored bytes

  // "model=...;layout=2,2;pp=1;block=16;format=f16": the text the scope digest hashes; with
  // stage layers "...;pp=2;layers=0-11,12-23;block=...".
  std::string canonical() const;
};

// The first 8 bytes of SHA-256(scope.canonical()), as 16 hex digits.
std::string scopeDigestHex(const KvBlockScope& scope);
std::string kvBlockKey(const KvBlockScope& scope, int rank, uint64_t block_hash);

struct KvBlockStoreOptions {
  RedisEndpoint endpoint;
  std::chrono::milliseconds timeout{500};  // connect, and each call
  std::chrono::seconds ttl{3600};          // > 0
  size_t max_block_bytes = size_t{64} << 20;
  std::chrono::milliseconds pause_after_failure{5000};
};

struct KvBlockCounters {
  uint64_t hits = 0, misses = 0, errors = 0, puts = 0;
  uint64_t bytes_read = 0, bytes_written = 0;  // payload bytes
  KvBlockCounters& operator+=(const KvBlockCounters& o);
};

// Value framing, exposed for tests: the stored bytes of a payload, and the payload of stored
// bytes (nullopt when they do not belong to this key or are damaged).
inline constexpr size_t kKvBlockHeaderBytes = 48;
std::string encodeKvBlock(const KvBlockScope& scope, int rank, uint64_t block_hash,
                          std::span<const uint8_t> payload);
std::optional<std::vector<uint8_t>> decodeKvBlock(const KvBlockScope& scope, int rank,
                                                  uint64_t block_hash, std::string_view value);

class KvBlockStore {
 public:
  KvBlockStore(KvBlockScope scope, int rank, KvBlockStoreOptions options);

  bool put(uint64_t block_hash, std::span<const uint8_t> bytes);
  std::optional<std::vector<uint8_t>> get(uint64_t block_hash);
  // Several blocks in one round trip (a prefix's chain of blocks); one entry per hash.
  std::vector<std::optional<std::vector<uint8_t>>> getMany(std::span<const uint64_t> hashes);

  // How many of `hashes` (a chain of blocks, in order) have an entry, counted from the first
  // (EXISTS, one round trip): the entries a load may find. 0 when Redis cannot tell (down,
  // slow: counted in errors).
  size_t countPresent(std::span<const uint64_t> hashes);

  KvBlockCounters counters() const;
  int rank() const { return rank_; }
  const KvBlockScope& scope() const { return scope_; }

 private:
  void countError(const std::exception& e, const char* what);
  bool paused();  // within the pause after a failure (counted as an error)
  void pauseAfterFailure();

  const KvBlockScope scope_;
  const int rank_;
  const KvBlockStoreOptions options_;
  RedisClient client_;
  std::atomic<uint64_t> hits_{0}, misses_{0}, errors_{0}, puts_{0}, bytes_read_{0},
      bytes_written_{0};
  std::atomic<int64_t> paused_until_ns_{0};  // steady_clock
  LogLimiter log_limiter_;
};

}  // namespace tpnode::node::redis
