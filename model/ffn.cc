// LlamaRank's feed-forward block: norm, gate and up projections, SwiGLU (GeGLU for gemma3),
// down projection (or the mixture of experts, model/moe_ffn.h), all-reduce, (gemma3: post norm),
// residual.
#include "model/kernels/cpu/gelu.h"
#include "model/kernels/cpu/ops.h"
#include "model/llama_rank.h"

namespace tpnode::model {

void LlamaRank::ffnBlock(int64_t l, int64_t n) {
  const LayerWeights& w = weights_.layers[static_cast<size_t>(l)];
  const int64_t dim = config_.n_embd;
  kernels::rmsNormRows(x_.data(), w.ffn_norm.data(), h_.data(), dim, n, config_.rms_eps);
  o_.resize(static_cast<size_t>(n * dim));
  if (moe_) {
    moe_->forward(w.moe, h_.data(), n, o_.data());
  } else {
    denseFfn(w, n);
  }
  allReduce(o_.data(), o_.size());
  if (!w.ffn_post_norm.empty()) {  // gemma3
    kernels::rmsNormRows(o_.data(), w.ffn_post_norm.data(), o_.data(), dim, n, config_.rms_eps);
  }
  for (size_t i = 0; i < o_.size(); ++i) x_[i] += o_[i];
}

void LlamaRank::denseFfn(const LayerWeights& w, int64_t n) {
  const int64_t ff = weights_.n_ff;
  gate_.resize(static_cast<size_t>(n * ff));
  up_.resize(static_cast<size_t>(n * ff));
  matmul(w.w_gate, h_.data(), n, gate_.data());
  matmul(w.w_up, h_.data(), n, up_.data());
  if (config_.ffn_act == FfnAct::kGeluTanh) {
    kernels::geglu(gate_.data(), up_.data(), n * ff);
  } else {
    for (int64_t i = 0; i < n; ++i) {  // per row, as ggml (its last n_ff % 16 use libm's expf)
      kernels::swiglu(gate_.data() + i * ff, up_.data() + i * ff, ff);
    }
  }
  matmul(w.w_down, gate_.data(), n, o_.data());
}

}  // namespace tpnode::model
