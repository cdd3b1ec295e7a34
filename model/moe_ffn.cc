#include "model/moe_ffn.h"

#include <algorithm>
#include <cmath>

#include "model/kernels/cpu/ggml_math.h"
#include "model/kernels/cpu/matmul.h"
#include "model/kernels/cpu/ops.h"
#include "model/moe_router.h"

namespace tpnode::model {

MoeFfn::MoeFfn(const ModelConfig& c, kernels::ThreadPool& pool)
    : dim_(c.n_embd),
      n_expert_(c.n_expert),
      k_(c.n_expert_used),
      normalize_(c.moe_norm_weights),
      pool_(pool),
      expert_pairs_(std::make_unique<std::atomic<uint64_t>[]>(static_cast<size_t>(c.n_expert))) {}

std::vector<uint64_t> MoeFfn::expertPairs() const {
  std::vector<uint64_t> out(static_cast<size_t>(n_expert_));
  for (int64_t e = 0; e < n_expert_; ++e) {
    out[static_cast<size_t>(e)] =
        expert_pairs_[static_cast<size_t>(e)].load(std::memory_order_relaxed);
  }
  return out;
}

void MoeFfn::matmul(const Matrix& w, const float* x, int64_t n, float* y, bool same_x) {
  kernels::matmul(w, x, n, y, w.rows, pool_, quant_scratch_, same_x);
}

void MoeFfn::expertFfn(const Matrix& gate, const Matrix& up, const Matrix& down, const float* x,
                       int64_t m, float* y) {
  const int64_t ff = gate.rows;
  gate_.resize(static_cast<size_t>(m * ff));
  up_.resize(static_cast<size_t>(m * ff));
  matmul(gate, x, m, gate_.data());
  matmul(up, x, m, up_.data(), /*same_x=*/true);
  pool_.parallelFor(m, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {  // per row, as ggml_swiglu on [ff, tokens]
      kernels::swiglu(gate_.data() + i * ff, up_.data() + i * ff, ff);
    }
  });
  matmul(down, gate_.data(), m, y);
}

void MoeFfn::forward(const MoeLayerWeights& w, const float* h, int64_t n, float* out) {
  const int64_t pairs = n * k_;
  logits_.resize(static_cast<size_t>(n * n_expert_));
  matmul(w.router, h, n, logits_.data());
  selected_.resize(static_cast<size_t>(pairs));
  weights_.resize(static_cast<size_t>(pairs));
  pool_.parallelFor(n, 1, [&](int64_t b, int64_t e) {  // each token's routing alone
    routeTokens(logits_.data() + b * n_expert_, e - b, n_expert_, k_, normalize_,
                selected_.data() + b * k_, weights_.data() + b * k_);
  });

  // Group the (token, j) pairs by expert (counting sort: pairs of one expert in token order).
  count_.assign(static_cast<size_t>(n_expert_ + 1), 0);
  for (int32_t e : selected_) ++count_[static_cast<size_t>(e) + 1];
  for (int64_t e = 0; e < n_expert_; ++e) {
    expert_pairs_[static_cast<size_t>(e)].fetch_add(static_cast<uint64_t>(count_[e + 1]),
                                                    std::memory_order_relaxed);
    count_[e + 1] += count_[e];
  }
  order_.resize(static_cast<size_t>(pairs));
  {
    std::vector<int64_t> next(count_.begin(), count_.end() - 1);
    for (int64_t p = 0; p < pairs; ++p) order_[next[selected_[p]]++] = p;
  }

  // The pairs of the experts this rank holds are [held_begin, held_end) in expert order; their
  // rows of h gathered in that order, so each expert's rows are one stretch of x_ and y_.
  const int64_t held_begin = count_[w.expert_begin];
  const int64_t held_end = count_[w.expert_begin + static_cast<int64_t>(w.gate.size())];
  x_.resize(static_cast<size_t>((held_end - held_begin) * dim_));
  y_.resize(x_.size());
  pool_.parallelFor(held_end - held_begin, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t token = order_[held_begin + r] / k_;
      std::copy_n(h + token * dim_, dim_, x_.data() + r * dim_);
    }
  });
  for (size_t i = 0; i < w.gate.size(); ++i) {
    const int64_t e = w.expert_begin + static_cast<int64_t>(i);
    const int64_t begin = count_[e] - held_begin, m = count_[e + 1] - count_[e];
    if (m == 0) continue;
    expertFfn(w.gate[i], w.up[i], w.down[i], x_.data() + begin * dim_, m, y_.data() + begin * dim_);
  }
  // slots_[p]: pair p's weighted expert output, ggml_mul(experts, weights) (zero for experts
  // held elsewhere); then the weighted outputs added in selection order, as build_moe_ffn's chain
  // of ggml_add.
  slots_.resize(static_cast<size_t>(pairs * dim_));
  pool_.parallelFor(pairs, 1, [&](int64_t b, int64_t e) {
    for (int64_t q = b; q < e; ++q) {
      const int64_t p = order_[q];
      float* dst = slots_.data() + p * dim_;
      if (q < held_begin || q >= held_end) {
        std::fill_n(dst, dim_, 0.f);
        continue;
      }
      const float wt = weights_[p];
      const float* src = y_.data() + (q - held_begin) * dim_;
      for (int64_t d = 0; d < dim_; ++d) dst[d] = src[d] * wt;
    }
  });
  pool_.parallelFor(n, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      float* o = out + t * dim_;
      const float* sl = slots_.data() + t * k_ * dim_;
      std::copy_n(sl, dim_, o);
      for (int64_t j = 1; j < k_; ++j) {
        for (int64_t d = 0; d < dim_; ++d) o[d] += sl[j * dim_ + d];
      }
    }
  });
  if (!w.shexp_gate.empty()) sharedExpert(w, h, n, out);
}

void MoeFfn::sharedExpert(const MoeLayerWeights& w, const float* h, int64_t n, float* out) {
  y_.resize(static_cast<size_t>(n * dim_));
  expertFfn(w.shexp_gate, w.shexp_up, w.shexp_down, h, n, y_.data());
  pool_.parallelFor(n, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const float g = kernels::ggml::dotF32(dim_, w.shexp_gate_inp.data(), h + t * dim_);
      const float gate = (g / (1.0f + std::exp(-g))) / g;  // ggml_div(ggml_silu(g), g)
      float* o = out + t * dim_;
      const float* y = y_.data() + t * dim_;
      for (int64_t d = 0; d < dim_; ++d) o[d] += y[d] * gate;
    }
  });
}

}  // namespace tpnode::model
