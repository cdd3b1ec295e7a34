#include "node/kv_tier_rank.h"

#include <algorithm>
#include <cstring>
#include <optional>

namespace tpnode::node {

namespace {

// Blocks read in one round trip at most (the client caps a round trip's replies).
constexpr size_t kLoadBatch = 32;

// The writer's cap is one block; the reader's a batch of values (each checked to be one block).
redis::KvBlockStoreOptions sized(redis::KvBlockStoreOptions o, size_t block_floats, size_t blocks) {
  o.max_block_bytes = blocks * (block_floats * sizeof(float) + redis::kKvBlockHeaderBytes + 64);
  return o;
}

}  // namespace

RankKvTier::RankKvTier(const KvTierOptions& options, int global_rank, size_t block_floats)
    : block_floats_(block_floats),
      reader_(options.scope, global_rank, sized(options.store, block_floats, kLoadBatch)),
      writer_(options.scope, global_rank, sized(options.store, block_floats, 1)),
      queue_(options.queue_blocks),
      tally_(options.tally ? options.tally : std::make_shared<KvTierTally>()),
      counts_(tally_->cell(static_cast<uint32_t>(global_rank))),
      thread_([this] { writerLoop(); }) {}

RankKvTier::~RankKvTier() {
  queue_.close();  // blocks still queued are dropped
  thread_.join();
}

void RankKvTier::store(const model::KvBlockIo& cache, std::span<const KvTierBlock> blocks) {
  for (const KvTierBlock& b : blocks) {
    // Only this thread pushes: a queue not full now has room for this block.
    if (queue_.full()) {
      counts_.store_dropped.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    Entry e{b.hash, std::vector<float>(block_floats_)};
    cache.exportBlock(b.block, e.floats);
    if (queue_.tryPush(e) != BoundedQueue<Entry>::Push::kQueued) {
      counts_.store_dropped.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

void RankKvTier::writerLoop() {
  while (std::optional<Entry> e = queue_.pop()) {
    const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(e->floats.data()),
                                         e->floats.size() * sizeof(float));
    if (writer_.put(e->hash, bytes)) {
      counts_.stored.fetch_add(1, std::memory_order_relaxed);
    } else {
      counts_.store_dropped.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

std::vector<float> RankKvTier::load(model::KvBlockIo& cache, std::span<const KvTierBlock> blocks) {
  std::vector<std::optional<std::vector<uint8_t>>> values;
  for (size_t at = 0; at < blocks.size(); at += kLoadBatch) {
    std::vector<uint64_t> hashes;
    for (size_t i = at; i < std::min(blocks.size(), at + kLoadBatch); ++i) {
      hashes.push_back(blocks[i].hash);
    }
    for (auto& v : reader_.getMany(hashes)) values.push_back(std::move(v));
  }
  std::vector<float> ok(blocks.size(), 0.0f);
  std::vector<float> floats(block_floats_);
  for (size_t i = 0; i < blocks.size(); ++i) {
    // The header matched the key (decodeKvBlock); the payload must be exactly one block here.
    if (!values[i] || values[i]->size() != block_floats_ * sizeof(float)) {
      counts_.fetch_failed.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    std::memcpy(floats.data(), values[i]->data(), values[i]->size());
    cache.importBlock(blocks[i].block, floats);
    ok[i] = 1.0f;
    counts_.fetched.fetch_add(1, std::memory_order_relaxed);
  }
  return ok;
}

KvTierCounters RankKvTier::counters() const {
  return counts_.read();
}

}  // namespace tpnode::node
