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

void LlamaRank::lastFfnBlock(int64_t l, int64_t n) {
  const auto m = static_cast<int64_t>(read_rows_.size());
  if (m == n) {
    ffnBlock(l, n);
    return;
  }
  const LayerWeights& w = weights_.layers[static_cast<size_t>(l)];
  ffnRows(w, m);
  allReduceReadRows(n);
  residual(w.ffn_post_norm, m);  // gemma3: post norm
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
