// KvBlockPool: node 0's bookkeeping of the ranks' paged KV cache (model/kv_cache.h) and the
// prefix index. Pure bookkeeping, no threads and no model: the Scheduler decides every block
// here once, and the step command carries each sequence's block table to every rank, so all
// ranks' tables agree.
//
// Blocks
// - `total` blocks of `block_size` positions. A block is in use (reference count > 0: held by
//   the sequences whose tables name it), cached (count 0 but in the prefix index: its bytes
//   still hold a known prefix, reclaimable) or free.
// - allocate() takes a free block first, else the least recently released cached block (it
//   leaves the index, and the observer's onEvict() runs before the block is handed out).
//
// Prefix index
// - A full block is identified by a chained hash: kvBlockHash(hash of the previous block (the
//   fingerprint for the first), the block's tokens). Its tokens and predecessor are kept and
//   compared on lookup, so a hash collision never shares a wrong block.
// - publish() enters a block only once all its positions are in the cache on every rank (after
//   the step that wrote the last one): a block still being prefilled is never shared.
// - matchPrefix() returns the longest run of indexed blocks that starts the token sequence,
//   taking a reference on each.
//
// Threads: one thread (the driver's loop, through the Scheduler) owns a pool; the observer is
// called on that thread.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tpnode::node {

// The chained hash of a block of tokens that follows the block hashed `prev`.
uint64_t kvBlockHash(uint64_t prev, std::span<const int32_t> tokens);

// The seed of a model's chains: its identity (model/model_identity.h) and the block size.
uint64_t kvFingerprint(std::string_view model_identity, int block_size);

// A second tier (another cluster's cache, a store) hears of blocks entering and leaving the
// index. A block's bytes on each rank are KvCache::exportBlock() of its id; they stay intact
// from onCached() until the step after onEvict() writes the block again.
class KvBlockObserver {
 public:
  virtual ~KvBlockObserver() = default;
  virtual void onCached(uint32_t block, uint64_t hash) = 0;
  virtual void onEvict(uint32_t block, uint64_t hash) = 0;
};

struct KvBlockStats {
  uint32_t total = 0;
  uint32_t free = 0;    // free or cached with no reference: what allocate() can hand out
  uint32_t cached = 0;  // in the prefix index (in use or not)
  uint64_t evictions = 0;
};

class KvBlockPool {
 public:
  // fingerprint: seeds the first block's hash (the model and its layout). prefix_cache false:
  // nothing is indexed, matchPrefix() finds nothing.
  KvBlockPool(uint32_t total, uint32_t block_size, bool prefix_cache, uint64_t fingerprint);

  uint32_t blockSize() const { return block_size_; }
  uint32_t total() const { return static_cast<uint32_t>(blocks_.size()); }
  uint32_t freeBlocks() const { return static_cast<uint32_t>(free_.size() + lru_.size()); }
  bool prefixCache() const { return prefix_cache_; }
  uint64_t fingerprint() const { return fingerprint_; }
  KvBlockStats stats() const;

  // The longest indexed prefix of whole blocks of `tokens`, at most `max_blocks` blocks: their
  // ids (one reference each) and hashes appended to `blocks` / `hashes` (both empty on entry).
  void matchPrefix(std::span<const int32_t> tokens, size_t max_blocks,
                   std::vector<uint32_t>& blocks, std::vector<uint64_t>& hashes);

  // A block with one reference, or nullopt when every block is in use.
  std::optional<uint32_t> allocate();

  // Drops one reference; at zero an indexed block becomes the most recently used cached one.
  void release(uint32_t block);

  // `block` (held) now holds `tokens` (block_size of them) after the block hashed `prev` on
  // every rank: enters the index unless another block already holds that prefix. Returns the
  // block's hash either way.
  uint64_t publish(uint32_t block, uint64_t prev, std::span<const int32_t> tokens);

  // Forgets every block (the ranks' caches were lost): all free, the index empty.
  void reset();

  // Not owned; must outlive the pool or be reset to null. May be null.
  void setObserver(KvBlockObserver* observer) { observer_ = observer; }

 private:
  struct Block {
    uint32_t refs = 0;
    bool indexed = false;
    uint64_t hash = 0, prev = 0;
    std::vector<int32_t> tokens;
    std::list<uint32_t>::iterator lru;  // valid when indexed && refs == 0
  };
  void unindex(uint32_t block);

  uint32_t block_size_;
  bool prefix_cache_;
  uint64_t fingerprint_;
  std::vector<Block> blocks_;
  std::vector<uint32_t> free_;  // refs 0, not indexed
  std::list<uint32_t> lru_;     // refs 0, indexed; least recently released first
  std::unordered_map<uint64_t, uint32_t> index_;
  uint64_t evictions_ = 0;
  KvBlockObserver* observer_ = nullptr;
};

}  // namespace tpnode::node
