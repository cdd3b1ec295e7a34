// LlamaRank's feed-forward block: norm, gate and up projections, SwiGLU (GeGLU for gemma3),
// down projection (or the mixture of experts, model/moe_ffn.h), all-reduce, (gemma3: post norm),
// residual; forward()'s last one on the rows whose output is read (lastFfnBlock).
#include <algorithm>

#include "model/kernels/cpu/gelu.h"
#include "model/kernels/cpu/ops.h"
#include "model/llama_rank.h"

namespace tpnode::model {

void LlamaRank::ffnBlock(int64_t l, int64_t n) {
  const LayerWeights& w = weights_.layers[static_cast<size_t>(l)];
  ffnRows(w, n);
  allReduce(o_.data(), o_.size());
  residual(w.ffn_post_norm, n);  // gemma3: post norm
}

void LlamaRank::ffnRows(const LayerWeights& w, int64_t n) {
  const int64_t dim = config_.n_embd;
  normRows(x_.data(), w.ffn_norm, h_.data(), dim, n);
  o_.resize(static_cast<size_t>(n * dim));
  if (n == 0) return;
  if (moe_) {
    moe_->forward(w.moe, h_.data(), n, o_.data());
  } else {
    denseFfn(w, n);
  }
}

std::span<const BatchToken> LlamaRank::lastFfnBlock(int64_t l, std::span<const BatchToken> batch) {
  const LayerWeights& w = weights_.layers[static_cast<size_t>(l)];
  const int64_t n = static_cast<int64_t>(batch.size());
  const int64_t dim = config_.n_embd;
  read_rows_.clear();
  for (int64_t i = 0; i < n; ++i) {
    const BatchToken& t = batch[static_cast<size_t>(i)];
    if (t.logits || t.tap) read_rows_.push_back(i);
  }
  const auto m = static_cast<int64_t>(read_rows_.size());
  if (m == n) {
    ffnBlock(l, n);
    return batch;
  }
  read_batch_.clear();
  for (int64_t i : read_rows_) read_batch_.push_back(batch[static_cast<size_t>(i)]);
  // Rows move towards the front only (read_rows_[j] >= j), so in place, in order.
  auto row = [dim](std::vector<float>& v, int64_t r) { return v.data() + r * dim; };
  for (int64_t j = 0; j < m; ++j) std::copy_n(row(x_, read_rows_[j]), dim, row(x_, j));
  x_.resize(static_cast<size_t>(m * dim));
  ffnRows(w, m);
  // The batch's rows for the all-reduce: each read row back at its place, the others zero (from
  // the last row down, so row j moves only after the rows past it are placed).
  o_.resize(static_cast<size_t>(n * dim));
  for (int64_t i = n - 1, j = m - 1; i >= 0; --i) {
    if (j >= 0 && read_rows_[j] == i) {
      if (j != i) std::copy_n(row(o_, j), dim, row(o_, i));
      --j;
    } else {
      std::fill_n(row(o_, i), dim, 0.f);
    }
  }
  allReduce(o_.data(), o_.size());
  for (int64_t j = 0; j < m; ++j) std::copy_n(row(o_, read_rows_[j]), dim, row(o_, j));
  o_.resize(static_cast<size_t>(m * dim));
  residual(w.ffn_post_norm, m);  // gemma3: post norm
  return read_batch_;
}

void LlamaRank::denseFfn(const LayerWeights& w, int64_t n) {
  const int64_t ff = weights_.n_ff;
  gate_.resize(static_cast<size_t>(n * ff));
  up_.resize(static_cast<size_t>(n * ff));
  matmul(w.w_gate, h_.data(), n, gate_.data());
  matmul(w.w_up, h_.data(), n, up_.data(), /*same_x=*/true);
  pool_.parallelFor(n, 1, [&](int64_t b, int64_t e) {
    if (config_.ffn_act == FfnAct::kGeluTanh) {
      kernels::geglu(gate_.data() + b * ff, up_.data() + b * ff, (e - b) * ff);
    } else {
      for (int64_t i = b; i < e; ++i) {  // per row, as ggml (its last n_ff % 16 use libm's expf)
        kernels::swiglu(gate_.data() + i * ff, up_.data() + i * ff, ff);
      }
    }
  });
  matmul(w.w_down, gate_.data(), n, o_.data());
}

}  // namespace tpnode::model
