#include "model/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"

namespace tpnode::model {

KvCache::KvCache(int64_t n_layer, int64_t n_slots, int64_t n_ctx, int64_t n_kv_heads,
                 int64_t head_dim, int64_t first_layer, int64_t block_size, int64_t n_blocks)
    : n_layer_(n_layer),
      n_slots_(n_slots),
      n_ctx_(n_ctx),
      row_(n_kv_heads * head_dim),
      first_layer_(first_layer),
      block_size_(block_size),
      n_blocks_(n_blocks) {
  if (n_slots < 1 || n_ctx < 1) {
    fail(ErrorCode::kInvalidArgument, "KV cache needs at least one slot and one position");
  }
  if (block_size < 1) fail(ErrorCode::kInvalidArgument, "KV block size {} < 1", block_size);
  if (n_blocks_ == 0) n_blocks_ = n_slots * slotBlocks();
  if (n_blocks_ < slotBlocks()) {
    fail(ErrorCode::kInvalidArgument,
         "{} KV blocks of {} positions cannot hold one context of {} positions", n_blocks_,
         block_size_, n_ctx_);
  }
  const size_t n = static_cast<size_t>(n_layer_ * n_blocks_ * block_size_ * row_);
  k_ = HostBuffer(n * sizeof(float));
  v_ = HostBuffer(n * sizeof(float));
  // Commit every page now: a page first touched by a step's KV write would be faulted in (and,
  // with transparent huge pages, compacted for) inside that step, which made prefill several
  // times slower; a cache that does not fit also fails here, at start, not mid-request.
  std::memset(k_.data(), 0, k_.size());
  std::memset(v_.data(), 0, v_.size());
}

void checkKvBlockShard(int64_t block, int64_t n_blocks, size_t floats, size_t block_floats) {
  if (block < 0 || block >= n_blocks) {
    fail(ErrorCode::kInvalidArgument, "KV block {} is outside [0, {})", block, n_blocks);
  }
  if (floats != block_floats) {
    fail(ErrorCode::kInvalidArgument, "KV block shard of {} floats, expected {}", floats,
         block_floats);
  }
}

void KvCache::exportBlock(int64_t block, std::span<float> out) const {
  checkKvBlockShard(block, n_blocks_, out.size(), blockFloats());
  const size_t run = static_cast<size_t>(block_size_ * row_);
  float* dst = out.data();
  for (int64_t l = 0; l < n_layer_; ++l) {
    const size_t at = static_cast<size_t>(((l * n_blocks_ + block) * block_size_) * row_);
    dst = std::copy_n(k0() + at, run, dst);
    dst = std::copy_n(v0() + at, run, dst);
  }
}

void KvCache::importBlock(int64_t block, std::span<const float> in) {
  checkKvBlockShard(block, n_blocks_, in.size(), blockFloats());
  const size_t run = static_cast<size_t>(block_size_ * row_);
  const float* src = in.data();
  for (int64_t l = 0; l < n_layer_; ++l) {
    const size_t at = static_cast<size_t>(((l * n_blocks_ + block) * block_size_) * row_);
    std::copy_n(src, run, k0() + at);
    std::copy_n(src + run, run, v0() + at);
    src += 2 * run;
  }
}

}  // namespace tpnode::model
