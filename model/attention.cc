// LlamaRank's attention block: norm, Q/K/V projections (+bias, +QK norm), RoPE (per-layer base),
// KV cache write, causal grouped-query attention over the cache (a sliding window on gemma3's
// local layers) in llama.cpp's float order (kernels/cpu/ggml_math.h), output projection,
// all-reduce, (gemma3: post norm), residual.
#include <algorithm>
#include <cmath>

#include "model/kernels/cpu/ggml_math.h"
#include "model/kernels/cpu/ops.h"
#include "model/llama_rank.h"

namespace tpnode::model {

void LlamaRank::attentionBlock(int64_t l, std::span<const BatchToken> batch) {
  const LayerWeights& w = weights_.layers[static_cast<size_t>(l)];
  const int64_t n = static_cast<int64_t>(batch.size());
  const int64_t dim = config_.n_embd, hd = config_.head_dim;
  const int64_t nq = weights_.n_head * hd, nkv = weights_.n_head_kv * hd;
  h_.resize(static_cast<size_t>(n * dim));
  kernels::rmsNormRows(x_.data(), w.attn_norm.data(), h_.data(), dim, n, config_.rms_eps);
  q_.resize(static_cast<size_t>(n * nq));
  k_.resize(static_cast<size_t>(n * nkv));
  v_.resize(static_cast<size_t>(n * nkv));
  matmul(w.wq, h_.data(), n, q_.data());
  matmul(w.wk, h_.data(), n, k_.data());
  matmul(w.wv, h_.data(), n, v_.data());
  const float* ff = weights_.rope_freqs.empty() ? nullptr : weights_.rope_freqs.data();
  if (!w.bq.empty()) {
    for (int64_t i = 0; i < n; ++i) {
      float* q = q_.data() + i * nq;
      float* k = k_.data() + i * nkv;
      float* v = v_.data() + i * nkv;
      for (int64_t j = 0; j < nq; ++j) q[j] += w.bq[static_cast<size_t>(j)];
      for (int64_t j = 0; j < nkv; ++j) k[j] += w.bk[static_cast<size_t>(j)];
      for (int64_t j = 0; j < nkv; ++j) v[j] += w.bv[static_cast<size_t>(j)];
    }
  }
  // Per-head norms over every token's heads at once (rows of hd values).
  if (!w.q_norm.empty()) {
    kernels::rmsNormRows(q_.data(), w.q_norm.data(), q_.data(), hd, n * weights_.n_head,
                         config_.rms_eps);
  }
  if (!w.k_norm.empty()) {
    kernels::rmsNormRows(k_.data(), w.k_norm.data(), k_.data(), hd, n * weights_.n_head_kv,
                         config_.rms_eps);
  }
  for (int64_t i = 0; i < n; ++i) {
    float* q = q_.data() + i * nq;
    float* k = k_.data() + i * nkv;
    float* v = v_.data() + i * nkv;
    const int64_t pos = batch[static_cast<size_t>(i)].pos;
    for (int64_t h = 0; h < weights_.n_head; ++h) {
      kernels::rope(q + h * hd, config_.n_rot, pos, config_.ropeBase(l), config_.ropeFreqScale(l),
                    config_.rope_style, ff);
    }
    for (int64_t h = 0; h < weights_.n_head_kv; ++h) {
      kernels::rope(k + h * hd, config_.n_rot, pos, config_.ropeBase(l), config_.ropeFreqScale(l),
                    config_.rope_style, ff);
    }
    const BatchToken& t = batch[static_cast<size_t>(i)];
    const int64_t block = kvBlock(t, t.pos), offset = t.pos % kv_.blockSize();
    std::copy_n(k, nkv, kv_.k(l, block, offset));
    std::copy_n(v, nkv, kv_.v(l, block, offset));
  }
  attend(l, batch);
  o_.resize(static_cast<size_t>(n * dim));
  matmul(w.wo, attn_.data(), n, o_.data());
  allReduce(o_.data(), o_.size());
  if (!w.attn_post_norm.empty()) {  // gemma3: norm the attention output before the residual
    kernels::rmsNormRows(o_.data(), w.attn_post_norm.data(), o_.data(), dim, n, config_.rms_eps);
  }
  for (size_t i = 0; i < o_.size(); ++i) x_[i] += o_[i];
}

namespace {

// Calls fn(block, offset, p, n) for the runs of positions [first, last] of t's sequence that lie
// in consecutive KV blocks (one stretch of memory in a layer), in position order.
template <typename BlockOf, typename Fn>
void forKvRuns(int64_t first, int64_t last, int64_t block_size, BlockOf&& block_of, Fn&& fn) {
  int64_t p = first;
  while (p <= last) {
    const int64_t block = block_of(p), offset = p % block_size;
    int64_t end = std::min(last + 1, p - offset + block_size);  // one past the run
    while (end <= last && block_of(end) == block + (end - p + offset) / block_size) {
      end = std::min(last + 1, end + block_size);
    }
    fn(block, offset, p, end - p);
    p = end;
  }
}

}  // namespace

void LlamaRank::attend(int64_t l, std::span<const BatchToken> batch) {
  const int64_t n = static_cast<int64_t>(batch.size());
  const int64_t hd = config_.head_dim;
  const int64_t heads = weights_.n_head;
  const int64_t group = weights_.n_head / weights_.n_head_kv;
  const int64_t nq = heads * hd;
  const float scale =
      config_.attn_scale > 0 ? config_.attn_scale : 1.0f / std::sqrt(static_cast<float>(hd));
  // Sliding-window layers: position p sees (p - n_swa, p], as llama.cpp's is_masked_swa.
  const int64_t window = config_.isSwa(l) ? config_.n_swa : 0;
  attn_.assign(static_cast<size_t>(n * nq), 0.f);
  const size_t kv_row_bytes = static_cast<size_t>(kv_.rowFloats()) * sizeof(float);
  // llama.cpp sums V with a different order for one token than for a batch (ggml_math.h).
  const auto order =
      n == 1 ? kernels::ggml::VSumOrder::kVecDot64 : kernels::ggml::VSumOrder::kTinyBlas16;
  const int64_t bs = kv_.blockSize();
  pool_.parallelFor(n * heads, 1, [&](int64_t b, int64_t e) {
    std::vector<float> scores;
    std::vector<float> lanes(kernels::ggml::kWeightedRowSumScratch);
    std::vector<float> vrows;  // V rows gathered when the sequence's blocks are not contiguous
    for (int64_t job = b; job < e; ++job) {
      const int64_t i = job / heads, h = job % heads, kvh = h / group;
      const BatchToken& t = batch[static_cast<size_t>(i)];
      const float* q = q_.data() + i * nq + h * hd;
      auto block_of = [&](int64_t p) { return kvBlock(t, p); };
      // Cells [first, pos]; the softmax's chunks of 16 start at a multiple of 16, as in
      // llama.cpp's row of all cells, so the row starts there with masked (-inf) entries.
      const int64_t first = window > 0 ? std::max<int64_t>(0, t.pos + 1 - window) : 0;
      const int64_t start = first & ~int64_t{15};
      const int64_t len = t.pos + 1 - start;
      scores.assign(static_cast<size_t>(len), -INFINITY);
      // Each score is one row's dot product, so scoring run by run gives the same bits.
      int64_t runs = 0;
      forKvRuns(first, t.pos, bs, block_of,
                [&](int64_t block, int64_t offset, int64_t p, int64_t m) {
                  kernels::ggml::scores(hd, q, kv_.k(l, block, offset) + kvh * hd, kv_row_bytes, m,
                                        scale, scores.data() + (p - start));
                  ++runs;
                });
      kernels::softmax(scores.data(), len);
      // The V sum runs over all rows at once (its lanes fold at the end): one run is read in
      // place, several are gathered into one stretch first.
      const float* rows = kv_.v(l, block_of(first), first % bs) + kvh * hd;
      size_t stride = kv_row_bytes;
      if (runs > 1) {
        vrows.resize(static_cast<size_t>((t.pos + 1 - first) * hd));
        forKvRuns(first, t.pos, bs, block_of,
                  [&](int64_t block, int64_t offset, int64_t p, int64_t m) {
                    for (int64_t r = 0; r < m; ++r) {
                      std::copy_n(kv_.v(l, block, offset + r) + kvh * hd, hd,
                                  vrows.data() + (p - first + r) * hd);
                    }
                  });
        rows = vrows.data();
        stride = static_cast<size_t>(hd) * sizeof(float);
      }
      kernels::ggml::weightedRowSum(order, scores.data() + (first - start), rows, stride,
                                    t.pos + 1 - first, hd, lanes.data(),
                                    attn_.data() + i * nq + h * hd);
    }
  });
}

}  // namespace tpnode::model
