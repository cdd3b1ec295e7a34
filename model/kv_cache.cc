#include "model/kv_cache.h"

#include "common/error.h"

namespace tpnode::model {

KvCache::KvCache(int64_t n_layer, int64_t n_slots, int64_t n_ctx, int64_t n_kv_heads,
                 int64_t head_dim, int64_t first_layer)
    : n_layer_(n_layer),
      n_slots_(n_slots),
      n_ctx_(n_ctx),
      row_(n_kv_heads * head_dim),
      first_layer_(first_layer) {
  if (n_slots < 1 || n_ctx < 1) {
    fail(ErrorCode::kInvalidArgument, "KV cache needs at least one slot and one position");
  }
  size_t n = static_cast<size_t>(n_layer_ * n_slots_ * n_ctx_ * row_);
  k_.assign(n, 0.f);
  v_.assign(n, 0.f);
}

}  // namespace tpnode::model
