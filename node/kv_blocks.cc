#include "node/kv_blocks.h"

#include <algorithm>

#include "common/check.h"

namespace tpnode::node {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace

uint64_t kvBlockHash(uint64_t prev, std::span<const int32_t> tokens) {
  uint64_t h = mix(prev ^ 0x9e3779b97f4a7c15ULL);
  for (int32_t t : tokens) h = mix(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(t)) + 1));
  return mix(h ^ tokens.size());
}

uint64_t kvFingerprint(std::string_view model_identity, int block_size) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a over the identity, then mixed with the size
  for (char c : model_identity) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ULL;
  return mix(h ^ static_cast<uint64_t>(block_size));
}

KvBlockPool::KvBlockPool(uint32_t total, uint32_t block_size, bool prefix_cache,
                         uint64_t fingerprint)
    : block_size_(block_size),
      prefix_cache_(prefix_cache),
      fingerprint_(fingerprint),
      blocks_(total) {
  TP_CHECK(total > 0 && block_size > 0);
  reset();
}

void KvBlockPool::reset() {
  for (Block& b : blocks_) b = Block{};
  free_.clear();
  for (uint32_t i = total(); i-- > 0;) free_.push_back(i);  // hands out 0, 1, 2, ... first
  lru_.clear();
  index_.clear();
}

KvBlockStats KvBlockPool::stats() const {
  return {total(), freeBlocks(), static_cast<uint32_t>(index_.size()), evictions_};
}

void KvBlockPool::matchPrefix(std::span<const int32_t> tokens, size_t max_blocks,
                              std::vector<uint32_t>& blocks, std::vector<uint64_t>& hashes) {
  if (!prefix_cache_) return;
  uint64_t prev = fingerprint_;
  const size_t n = std::min(max_blocks, tokens.size() / block_size_);
  for (size_t i = 0; i < n; ++i) {
    auto part = tokens.subspan(i * block_size_, block_size_);
    const uint64_t h = kvBlockHash(prev, part);
    auto it = index_.find(h);
    if (it == index_.end()) break;
    Block& b = blocks_[it->second];
    if (b.prev != prev || !std::equal(part.begin(), part.end(), b.tokens.begin(), b.tokens.end())) {
      break;  // a hash collision: not this prefix
    }
    if (b.refs++ == 0) lru_.erase(b.lru);
    blocks.push_back(it->second);
    hashes.push_back(h);
    prev = h;
  }
}

std::optional<uint32_t> KvBlockPool::allocate() {
  uint32_t id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    id = lru_.front();
    lru_.pop_front();
    if (observer_ != nullptr) observer_->onEvict(id, blocks_[id].hash);
    unindex(id);
    ++evictions_;
  } else {
    return std::nullopt;
  }
  blocks_[id].refs = 1;
  return id;
}

void KvBlockPool::release(uint32_t block) {
  TP_CHECK(block < total() && blocks_[block].refs > 0, "KV block {} released while free", block);
  Block& b = blocks_[block];
  if (--b.refs > 0) return;
  if (b.indexed) {
    b.lru = lru_.insert(lru_.end(), block);
  } else {
    free_.push_back(block);
  }
}

uint64_t KvBlockPool::publish(uint32_t block, uint64_t prev, std::span<const int32_t> tokens) {
  TP_CHECK(block < total() && blocks_[block].refs > 0 && tokens.size() == block_size_);
  const uint64_t h = kvBlockHash(prev, tokens);
  Block& b = blocks_[block];
  if (!prefix_cache_ || b.indexed || index_.count(h) != 0) return h;
  b.indexed = true;
  b.hash = h;
  b.prev = prev;
  b.tokens.assign(tokens.begin(), tokens.end());
  index_[h] = block;
  if (observer_ != nullptr) observer_->onCached(block, h);
  return h;
}

void KvBlockPool::unindex(uint32_t block) {
  Block& b = blocks_[block];
  index_.erase(b.hash);
  b.indexed = false;
  b.tokens.clear();
}

}  // namespace tpnode::node
