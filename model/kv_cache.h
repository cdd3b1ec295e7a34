// KvCache: one rank's keys and values (F32) for its local kv heads, in fixed-size blocks of
// `block_size` positions. A sequence's positions live in the blocks of its block table
// (position p in table[p / block_size] at offset p % block_size); tables are decided by node 0
// (node/kv_blocks.h) and carried to every rank in the step command, so every rank's tables
// agree. Owned and used by one rank's thread.
// Layout: [layer][block][offset][local kv head][head_dim], K and V separately. A pipeline stage's
// cache holds only its layers [first_layer, first_layer + n_layer); k()/v() take the model's
// layer numbers.
// Without a block table (a batch token with an empty one) slot s owns the blocks
// [s * slotBlocks(), (s + 1) * slotBlocks()): the fixed per-slot layout of contiguous ranks.
// exportBlock/importBlock copy one block's shard (every layer this rank holds, K then V) for a
// second tier: the same bytes on a rank with the same layout restore the same attention.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "model/host_buffer.h"

namespace tpnode::model {

// How many positions a KV block holds by default (--kv-block-size).
inline constexpr int64_t kDefaultKvBlockSize = 16;

// Blocks of `block_size` positions needed for `positions` positions.
inline int64_t kvBlocksFor(int64_t positions, int64_t block_size) {
  return (positions + block_size - 1) / block_size;
}

// A rank's KV cache seen block by block by a second tier (node/kv_tier_rank.h): one block's
// shard out and in, n_layer x (K then V) x block_size x row floats, the same layout on CPU
// (KvCache) and GPU (model/cuda/cuda_rank.h) ranks. The rank's thread only, between steps.
class KvBlockIo {
 public:
  virtual ~KvBlockIo() = default;
  virtual size_t blockFloats() const = 0;
  // `out`/`in` hold blockFloats() floats; Error(kInvalidArgument) for a bad block or size.
  virtual void exportBlock(int64_t block, std::span<float> out) const = 0;
  virtual void importBlock(int64_t block, std::span<const float> in) = 0;
};

// For KvBlockIo implementations: Error(kInvalidArgument) unless `block` is in [0, n_blocks) and
// `floats` is one block's shard (`block_floats`).
void checkKvBlockShard(int64_t block, int64_t n_blocks, size_t floats, size_t block_floats);

class KvCache final : public KvBlockIo {
 public:
  // n_blocks 0: n_slots * kvBlocksFor(n_ctx, block_size) (the memory of n_slots full contexts).
  KvCache(int64_t n_layer, int64_t n_slots, int64_t n_ctx, int64_t n_kv_heads, int64_t head_dim,
          int64_t first_layer = 0, int64_t block_size = kDefaultKvBlockSize, int64_t n_blocks = 0);

  int64_t slots() const { return n_slots_; }
  int64_t ctx() const { return n_ctx_; }
  int64_t blockSize() const { return block_size_; }
  int64_t blocks() const { return n_blocks_; }
  int64_t slotBlocks() const { return kvBlocksFor(n_ctx_, block_size_); }
  int64_t rowFloats() const { return row_; }  // floats per position (kv heads * head_dim)
  float* k(int64_t layer, int64_t block, int64_t offset) {
    return k0() + index(layer, block, offset);
  }
  float* v(int64_t layer, int64_t block, int64_t offset) {
    return v0() + index(layer, block, offset);
  }
  uint64_t bytes() const { return k_.size() + v_.size(); }

  // One block's shard: n_layer x (K then V) x block_size x rowFloats() floats.
  size_t blockFloats() const override {
    return static_cast<size_t>(n_layer_ * 2 * block_size_ * row_);
  }
  void exportBlock(int64_t block, std::span<float> out) const override;
  void importBlock(int64_t block, std::span<const float> in) override;

 private:
  size_t index(int64_t layer, int64_t block, int64_t offset) const {
    return static_cast<size_t>(
        (((layer - first_layer_) * n_blocks_ + block) * block_size_ + offset) * row_);
  }
  float* k0() { return reinterpret_cast<float*>(k_.data()); }
  float* v0() { return reinterpret_cast<float*>(v_.data()); }
  const float* k0() const { return reinterpret_cast<const float*>(k_.data()); }
  const float* v0() const { return reinterpret_cast<const float*>(v_.data()); }
  int64_t n_layer_, n_slots_, n_ctx_, row_, first_layer_, block_size_, n_blocks_;
  // Zero-filled anonymous memory, committed at construction, in transparent huge pages where
  // the kernel gives them: a decode step reads every layer's cached rows from memory (the
  // weights stream through the caches in between), and on 4 KiB pages the attention's loads
  // and prefetches wait on page walks.
  HostBuffer k_, v_;
};

}  // namespace tpnode::model
