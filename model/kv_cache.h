// KvCache: one rank's keys and values (F32) for its local kv heads, for `slots` independent
// sequences of up to `n_ctx` positions each. Owned and used by one rank's thread.
// Layout: [layer][slot][pos][local kv head][head_dim], K and V separately. A pipeline stage's
// cache holds only its layers [first_layer, first_layer + n_layer); k()/v() take the model's
// layer numbers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tpnode::model {

class KvCache {
 public:
  KvCache(int64_t n_layer, int64_t n_slots, int64_t n_ctx, int64_t n_kv_heads, int64_t head_dim,
          int64_t first_layer = 0);

  int64_t slots() const { return n_slots_; }
  int64_t ctx() const { return n_ctx_; }
  int64_t rowFloats() const { return row_; }  // floats per position (kv heads * head_dim)
  float* k(int64_t layer, int64_t slot, int64_t pos) { return k_.data() + index(layer, slot, pos); }
  float* v(int64_t layer, int64_t slot, int64_t pos) { return v_.data() + index(layer, slot, pos); }
  uint64_t bytes() const { return (k_.size() + v_.size()) * sizeof(float); }

 private:
  size_t index(int64_t layer, int64_t slot, int64_t pos) const {
    return static_cast<size_t>((((layer - first_layer_) * n_slots_ + slot) * n_ctx_ + pos) * row_);
  }
  int64_t n_layer_, n_slots_, n_ctx_, row_, first_layer_;
  std::vector<float> k_, v_;
};

}  // namespace tpnode::model
