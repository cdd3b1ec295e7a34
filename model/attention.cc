// LlamaRank's attention block: norm, Q/K/V projections (+bias, +QK norm), RoPE (per-layer base),
// KV cache write, causal grouped-query attention over the cache (a sliding window on gemma3's
// local layers) in llama.cpp's float order (kernels/cpu/ggml_math.h), output projection,
// all-reduce, (gemma3: post norm), residual. Prefill attends in blocks of consecutive queries of
// one sequence per kv head (LlamaRank::queryBlocks), each query in the one-query order.
// forward()'s last block runs the queries on the rows whose output is read only
// (lastAttentionBlock).
#include <algorithm>
#include <cmath>

#include "model/kernels/cpu/aligned_vector.h"
#include "model/kernels/cpu/ggml_math.h"
#include "model/kernels/cpu/ops.h"
#include "model/kernels/cpu/transpose.h"
#include "model/llama_rank.h"

namespace tpnode::model {

namespace {

// llama.cpp sums V in a different order for one token than for a batch (ggml_math.h): the order
// of a batch of n rows.
kernels::ggml::VSumOrder vSumOrder(int64_t n) {
  return n == 1 ? kernels::ggml::VSumOrder::kVecDot64 : kernels::ggml::VSumOrder::kTinyBlas16;
}

}  // namespace

void LlamaRank::attentionBlock(int64_t l, std::span<const BatchToken> batch, bool read_rows_only) {
  const LayerWeights& w = weights_.layers[static_cast<size_t>(l)];
  const int64_t n = static_cast<int64_t>(batch.size());
  const int64_t m = read_rows_only ? static_cast<int64_t>(read_rows_.size()) : n;
  const int64_t dim = config_.n_embd, hd = config_.head_dim;
  const int64_t nq = weights_.n_head * hd, nkv = weights_.n_head_kv * hd;
  h_.resize(static_cast<size_t>(n * dim));
  normRows(x_.data(), w.attn_norm, h_.data(), dim, n);
  q_.resize(static_cast<size_t>(m * nq));
  k_.resize(static_cast<size_t>(n * nkv));
  v_.resize(static_cast<size_t>(n * nkv));
  if (!read_rows_only) {
    matmul(w.wq, h_.data(), n, q_.data());
    matmul(w.wk, h_.data(), n, k_.data(), /*same_x=*/true);
    matmul(w.wv, h_.data(), n, v_.data(), /*same_x=*/true);
  } else {  // K and V of every row (later tokens attend to them), then the read rows' queries
    matmul(w.wk, h_.data(), n, k_.data());
    matmul(w.wv, h_.data(), n, v_.data(), /*same_x=*/true);
    compactRows(h_);
    if (m > 0) matmul(w.wq, h_.data(), m, q_.data());
  }
  prepareQkv(l, batch, read_rows_only);
  o_.resize(static_cast<size_t>(m * dim));
  if (m > 0) {
    // In the whole batch's order (vSumOrder(n)): read rows alone get the full block's values.
    attend(l, read_rows_only ? std::span<const BatchToken>(read_batch_) : batch, vSumOrder(n));
    matmul(w.wo, attn_.data(), m, o_.data());
  }
  if (!read_rows_only) {
    allReduce(o_.data(), o_.size());
  } else {
    allReduceReadRows(n);
    compactRows(x_);
  }
  residual(w.attn_post_norm, m);  // gemma3: norm the attention output before the residual
}

std::span<const BatchToken> LlamaRank::lastAttentionBlock(int64_t l,
                                                          std::span<const BatchToken> batch) {
  const int64_t n = static_cast<int64_t>(batch.size());
  read_rows_.clear();
  for (int64_t i = 0; i < n; ++i) {
    const BatchToken& t = batch[static_cast<size_t>(i)];
    if (t.logits || t.tap) read_rows_.push_back(i);
  }
  if (static_cast<int64_t>(read_rows_.size()) == n) {
    attentionBlock(l, batch);
    return batch;
  }
  read_batch_.clear();
  for (int64_t i : read_rows_) read_batch_.push_back(batch[static_cast<size_t>(i)]);
  attentionBlock(l, batch, /*read_rows_only=*/true);
  return read_batch_;
}

void LlamaRank::compactRows(std::vector<float>& rows) {
  const int64_t dim = config_.n_embd;
  const auto m = static_cast<int64_t>(read_rows_.size());
  for (int64_t j = 0; j < m; ++j) {
    const int64_t i = read_rows_[static_cast<size_t>(j)];
    if (i != j) std::copy_n(rows.data() + i * dim, dim, rows.data() + j * dim);
  }
  rows.resize(static_cast<size_t>(m * dim));
}

void LlamaRank::allReduceReadRows(int64_t n) {
  const int64_t dim = config_.n_embd;
  const auto m = static_cast<int64_t>(read_rows_.size());
  auto row = [&](int64_t r) { return o_.data() + r * dim; };
  // Each read row back at its batch position, the others zero (from the last row down, so row j
  // moves only after the rows past it are placed).
  o_.resize(static_cast<size_t>(n * dim));
  for (int64_t i = n - 1, j = m - 1; i >= 0; --i) {
    if (j >= 0 && read_rows_[static_cast<size_t>(j)] == i) {
      if (j != i) std::copy_n(row(j), dim, row(i));
      --j;
    } else {
      std::fill_n(row(i), dim, 0.f);
    }
  }
  allReduce(o_.data(), o_.size());
  compactRows(o_);
}

void LlamaRank::prepareQkv(int64_t l, std::span<const BatchToken> batch, bool read_rows_only) {
  const LayerWeights& w = weights_.layers[static_cast<size_t>(l)];
  const int64_t hd = config_.head_dim;
  const int64_t nq = weights_.n_head * hd, nkv = weights_.n_head_kv * hd;
  const float* angles = ropeAnglesFor(l, batch);
  // Queries j in [b, e) of q_, batch row row(j) each.
  auto queries = [&](int64_t b, int64_t e, auto row) {
    for (int64_t j = b; j < e && !w.bq.empty(); ++j) {
      float* q = q_.data() + j * nq;
      for (int64_t c = 0; c < nq; ++c) q[c] += w.bq[static_cast<size_t>(c)];
    }
    // Per-head norms over the tokens' heads at once (rows of hd values).
    if (!w.q_norm.empty()) {
      kernels::rmsNormRows(q_.data() + b * nq, w.q_norm.data(), q_.data() + b * nq, hd,
                           (e - b) * weights_.n_head, config_.rms_eps);
    }
    for (int64_t j = b; j < e; ++j) {
      float* q = q_.data() + j * nq;
      const float* cs = angles + row(j) * config_.n_rot;  // the position's rotations
      for (int64_t h = 0; h < weights_.n_head; ++h) {
        kernels::ropeRotate(q + h * hd, config_.n_rot, config_.rope_style, cs);
      }
    }
  };
  // Keys and values of batch rows [b, e), into the cache.
  auto keysValues = [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e && !w.bk.empty(); ++i) {
      float* k = k_.data() + i * nkv;
      for (int64_t c = 0; c < nkv; ++c) k[c] += w.bk[static_cast<size_t>(c)];
    }
    for (int64_t i = b; i < e && !w.bv.empty(); ++i) {
      float* v = v_.data() + i * nkv;
      for (int64_t c = 0; c < nkv; ++c) v[c] += w.bv[static_cast<size_t>(c)];
    }
    if (!w.k_norm.empty()) {
      kernels::rmsNormRows(k_.data() + b * nkv, w.k_norm.data(), k_.data() + b * nkv, hd,
                           (e - b) * weights_.n_head_kv, config_.rms_eps);
    }
    for (int64_t i = b; i < e; ++i) {
      float* k = k_.data() + i * nkv;
      const BatchToken& t = batch[static_cast<size_t>(i)];
      const float* cs = angles + i * config_.n_rot;
      for (int64_t h = 0; h < weights_.n_head_kv; ++h) {
        kernels::ropeRotate(k + h * hd, config_.n_rot, config_.rope_style, cs);
      }
      const int64_t block = kvBlock(t, t.pos), offset = t.pos % kv_.blockSize();
      std::copy_n(k, nkv, kv_.k(l, block, offset));
      std::copy_n(v_.data() + i * nkv, nkv, kv_.v(l, block, offset));
    }
  };
  const auto n = static_cast<int64_t>(batch.size());
  if (!read_rows_only) {  // q_ row i: batch row i
    pool_.parallelFor(n, 1, [&](int64_t b, int64_t e) {
      queries(b, e, [](int64_t j) { return j; });
      keysValues(b, e);
    });
    return;
  }
  pool_.parallelFor(n, 1, keysValues);
  pool_.parallelFor(static_cast<int64_t>(read_rows_.size()), 1, [&](int64_t b, int64_t e) {
    queries(b, e, [&](int64_t j) { return read_rows_[static_cast<size_t>(j)]; });
  });
}

const float* LlamaRank::ropeAnglesFor(int64_t l, std::span<const BatchToken> batch) {
  const float base = config_.ropeBase(l), scale = config_.ropeFreqScale(l);
  const int64_t n = static_cast<int64_t>(batch.size()), n_rot = config_.n_rot;
  for (const RopeAngles& r : rope_angles_) {
    if (r.base == base && r.scale == scale &&
        std::equal(batch.begin(), batch.end(), r.positions.begin(), r.positions.end(),
                   [](const BatchToken& t, int64_t pos) { return t.pos == pos; })) {
      return r.cs.data();
    }
  }
  RopeAngles& r = rope_angles_[rope_next_];
  rope_next_ = (rope_next_ + 1) % rope_angles_.size();
  r.base = base;
  r.scale = scale;
  r.positions.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    r.positions[static_cast<size_t>(i)] = batch[static_cast<size_t>(i)].pos;
  r.cs.resize(static_cast<size_t>(n * n_rot));
  const float* ff = weights_.rope_freqs.empty() ? nullptr : weights_.rope_freqs.data();
  pool_.parallelFor(n, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      kernels::ropeAngles(n_rot, r.positions[static_cast<size_t>(i)], base, scale, ff,
                          r.cs.data() + i * n_rot);
    }
  });
  return r.cs.data();
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

// Tokens of one sequence: the same slot and the same block table (same cells for a position).
bool sameSequence(const BatchToken& a, const BatchToken& b) {
  return a.slot == b.slot && a.blocks.data() == b.blocks.data();
}

// Row j of rows `stride` bytes apart.
const float* rowAt(const float* rows, size_t stride, int64_t j) {
  return reinterpret_cast<const float*>(reinterpret_cast<const unsigned char*>(rows) +
                                        static_cast<size_t>(j) * stride);
}

// Asks for the first `bytes` of rows [j, j + n) (`stride` bytes apart) to be brought into L2.
void prefetchRows(const float* rows, size_t stride, int64_t j, int64_t n, size_t bytes) {
  for (; n > 0; --n, ++j) {
    const auto* p = reinterpret_cast<const char*>(rowAt(rows, stride, j));
    for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off, 0, 2);
  }
}

// Decode's scores against the K rows read in place: scoresHeads over runs of kPrefetchRows rows
// (each row's scores are computed alone: the same bits as one call), the K and V rows of the
// next run prefetched meanwhile. A decode step reads its cached rows from memory (the weights
// stream through the caches between two layers) and the scores' stride (a row of every kv head
// per position) and the V sum's (llama.cpp's 64 lanes: 64 rows apart) are orders the hardware
// prefetcher does not run ahead of: perf put most of attention's time on those loads. (All of a
// head's rows prefetched at once before its scores did not shorten attention in perf.)
constexpr int64_t kPrefetchRows = 4;
void scoresPrefetching(int64_t hd, const float* q, int64_t nh, const float* k, const float* v,
                       size_t stride, int64_t cells, float scale, float* out, int64_t out_stride) {
  const size_t bytes = static_cast<size_t>(hd) * sizeof(float);
  prefetchRows(k, stride, 0, std::min(kPrefetchRows, cells), bytes);
  prefetchRows(v, stride, 0, std::min(kPrefetchRows, cells), bytes);
  for (int64_t j = 0; j < cells; j += kPrefetchRows) {
    const int64_t next = std::min(kPrefetchRows, cells - j - kPrefetchRows);
    prefetchRows(k, stride, j + kPrefetchRows, next, bytes);
    prefetchRows(v, stride, j + kPrefetchRows, next, bytes);
    kernels::ggml::scoresHeads(hd, q, nh, rowAt(k, stride, j), stride,
                               std::min(kPrefetchRows, cells - j), scale, out + j, out_stride);
  }
}

}  // namespace

void LlamaRank::attend(int64_t l, std::span<const BatchToken> batch,
                       kernels::ggml::VSumOrder order) {
  const int64_t n = static_cast<int64_t>(batch.size());
  const int64_t hd = config_.head_dim;
  const int64_t heads = weights_.n_head, kv_heads = weights_.n_head_kv;
  const int64_t group = heads / kv_heads;
  const int64_t nq = heads * hd;
  const float scale =
      config_.attn_scale > 0 ? config_.attn_scale : 1.0f / std::sqrt(static_cast<float>(hd));
  // Sliding-window layers: position p sees (p - n_swa, p], as llama.cpp's is_masked_swa.
  const int64_t window = config_.isSwa(l) ? config_.n_swa : 0;
  attn_.resize(static_cast<size_t>(n * nq));  // every value is written below
  const size_t kv_row_bytes = static_cast<size_t>(kv_.rowFloats()) * sizeof(float);
  const int64_t bs = kv_.blockSize();
  const std::vector<QueryBlock> blocks = queryBlocks(batch, window);
  // A block of several queries in the batch order (16 lanes) takes V transposed, value d of a
  // cell c at [d * span + c]: each output value's lanes then read one contiguous row of V and of
  // the weights (ggml_math.h weightedRowSumHeadsT; the same bits), which the block's queries
  // share. The blocks of one sequence share one such copy (and one of the K rows) per kv head:
  // gathered once here, not once per block (a prompt's later blocks read all earlier cells).
  auto transposedBlock = [&](const QueryBlock& qb) {
    return order == kernels::ggml::VSumOrder::kTinyBlas16 && qb.end - qb.begin > 1;
  };
  std::vector<QueryRun> runs;
  std::vector<size_t> run_of;
  size_t shared_floats = 0;
  if (order == kernels::ggml::VSumOrder::kTinyBlas16) run_of.resize(blocks.size());  // not decode
  for (size_t b = 0; b < run_of.size(); ++b) {
    const QueryBlock& qb = blocks[b];
    bool continues = false;  // the previous block's sequence, at the next position
    if (b > 0) {
      const BatchToken& prev = batch[static_cast<size_t>(qb.begin - 1)];
      const BatchToken& t = batch[static_cast<size_t>(qb.begin)];
      continues = sameSequence(prev, t) && t.pos == prev.pos + 1;
    }
    if (continues) {
      runs.back().last = b;
      runs.back().lo = std::min(runs.back().lo, qb.lo);
      runs.back().hi = qb.hi;
      runs.back().copied = runs.back().copied || transposedBlock(qb);
    } else {
      runs.push_back({b, qb.lo, qb.hi, transposedBlock(qb), 0});
    }
    run_of[b] = runs.size() - 1;
  }
  for (QueryRun& run : runs) {
    if (!run.copied) continue;
    run.at = shared_floats;
    shared_floats += static_cast<size_t>((run.hi + 1 - run.lo) * hd * kv_heads);
  }
  const bool shared = shared_floats > 0 && 2 * shared_floats * sizeof(float) <= shared_rows_budget_;
  if (shared) {
    if (shared_k_.size() < shared_floats) {
      shared_k_.resize(shared_floats);
      shared_v_.resize(shared_floats);
    }
    // One task per run, kv head and stretch of consecutive KV blocks, over the pool.
    struct Gather {
      size_t run;
      int64_t kvh, block, offset, p, m;
    };
    std::vector<Gather> gathers;
    for (size_t r = 0; r < runs.size(); ++r) {
      const QueryRun& run = runs[r];
      if (!run.copied) continue;
      const BatchToken& last = batch[static_cast<size_t>(blocks[run.last].end - 1)];
      for (int64_t kvh = 0; kvh < kv_heads; ++kvh) {
        forKvRuns(
            run.lo, run.hi, bs, [&](int64_t p) { return kvBlock(last, p); },
            [&](int64_t block, int64_t offset, int64_t p, int64_t m) {
              gathers.push_back({r, kvh, block, offset, p, m});
            });
      }
    }
    pool_.parallelFor(static_cast<int64_t>(gathers.size()), 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const Gather& g = gathers[static_cast<size_t>(i)];
        const QueryRun& run = runs[g.run];
        const int64_t span = run.hi + 1 - run.lo, c0 = g.p - run.lo;
        const size_t at = run.at + static_cast<size_t>(g.kvh * span * hd);
        for (int64_t r = 0; r < g.m; ++r) {
          std::copy_n(kv_.k(l, g.block, g.offset + r) + g.kvh * hd, hd,
                      shared_k_.data() + at + static_cast<size_t>((c0 + r) * hd));
        }
        kernels::transposeFloats(kv_.v(l, g.block, g.offset) + g.kvh * hd, kv_.rowFloats(), g.m, hd,
                                 shared_v_.data() + at + c0, span);
      }
    });
  }
  // One job: a query block and one kv head, i.e. the block's tokens times the kv head's group
  // of query heads. Each query's arithmetic is the one-query order of ggml_math.h, so blocking
  // changes no bits; it only reads the block's K and V rows from the cache once. With fewer
  // jobs than kJobsPerThread per thread (decode, short prompts, models with one or two kv
  // heads) each group is cut into `parts` runs of its heads, each job reading the rows itself
  // (per head the same bits: ggml_math.h's *Heads functions compute each head alone).
  const int64_t kv_jobs = static_cast<int64_t>(blocks.size()) * kv_heads;
  const int64_t want = kJobsPerThread * pool_.size();
  const int64_t parts =
      pool_.size() > 1 && kv_jobs < want ? std::min(group, (want + kv_jobs - 1) / kv_jobs) : 1;
  pool_.parallelFor(kv_jobs * parts, 1, [&](int64_t b, int64_t e) {
    // Per-thread scratch kept across calls (a long prompt's gathered rows are large; allocating
    // them per call would fault their pages in every layer).
    // 64-byte aligned (kernels::AlignedVector): the kernels' vector loads of a row then never
    // span two cache lines.
    thread_local kernels::AlignedVector<float> scores, lanes, krows, vrows, vcols;
    lanes.resize(kernels::ggml::kWeightedRowSumHeadsScratch);
    for (int64_t job = b; job < e; ++job) {
      const QueryBlock& qb = blocks[static_cast<size_t>(job / parts / kv_heads)];
      const int64_t kvh = job / parts % kv_heads, part = job % parts;
      // Query heads [h0, h0 + nh) of the kv head's group.
      const int64_t h0 = part * group / parts, nh = (part + 1) * group / parts - h0;
      const int64_t head0 = kvh * group + h0;
      // The block's last token has the largest position, so its table covers every cell read.
      const BatchToken& tmax = batch[static_cast<size_t>(qb.end - 1)];
      auto block_of = [&](int64_t p) { return kvBlock(tmax, p); };
      int64_t kv_runs = 0;
      forKvRuns(qb.lo, qb.hi, bs, block_of, [&](int64_t, int64_t, int64_t, int64_t) { ++kv_runs; });
      // Rows of cells [lo, hi] for this kv head: in place when they are one run and the block
      // one token (decode), else gathered into one compact stretch (prefill: read from the cache
      // once, then by every query of the block from L1/L2; the V sum's lanes stride over rows).
      const float* krow0 = kv_.k(l, block_of(qb.lo), qb.lo % bs) + kvh * hd;
      const float* vrow0 = kv_.v(l, block_of(qb.lo), qb.lo % bs) + kvh * hd;
      size_t stride = kv_row_bytes;
      const bool in_place = kv_runs == 1 && qb.end - qb.begin == 1;
      const bool transposed = transposedBlock(qb);  // never in place: several queries
      // Transposed V: value d of cell c at vcol0[d * span + c - qb.lo].
      const float* vcol0 = nullptr;
      int64_t span = qb.hi + 1 - qb.lo;
      if (transposed && shared) {
        const QueryRun& run = runs[run_of[static_cast<size_t>(job / parts / kv_heads)]];
        span = run.hi + 1 - run.lo;
        const size_t at = run.at + static_cast<size_t>(kvh * span * hd);
        krow0 = shared_k_.data() + at + static_cast<size_t>((qb.lo - run.lo) * hd);
        vcol0 = shared_v_.data() + at + (qb.lo - run.lo);
        stride = static_cast<size_t>(hd) * sizeof(float);
      } else if (!in_place) {
        const auto rows = static_cast<size_t>(span * hd);
        if (krows.size() < rows) krows.resize(rows);
        if (transposed) {
          if (vcols.size() < rows) vcols.resize(rows);
        } else if (vrows.size() < rows) {
          vrows.resize(rows);
        }
        forKvRuns(qb.lo, qb.hi, bs, block_of,
                  [&](int64_t block, int64_t offset, int64_t p, int64_t m) {
                    const int64_t c0 = p - qb.lo;
                    for (int64_t r = 0; r < m; ++r) {
                      std::copy_n(kv_.k(l, block, offset + r) + kvh * hd, hd,
                                  krows.data() + (c0 + r) * hd);
                      if (!transposed) {
                        std::copy_n(kv_.v(l, block, offset + r) + kvh * hd, hd,
                                    vrows.data() + (c0 + r) * hd);
                      }
                    }
                    if (transposed) {  // the run's rows (a KV block's), value d of each to row d
                      kernels::transposeFloats(kv_.v(l, block, offset) + kvh * hd, kv_.rowFloats(),
                                               m, hd, vcols.data() + c0, span);
                    }
                  });
        krow0 = krows.data();
        vrow0 = vrows.data();
        vcol0 = vcols.data();
        stride = static_cast<size_t>(hd) * sizeof(float);
      }
      for (int64_t i = qb.begin; i < qb.end; ++i) {
        const BatchToken& t = batch[static_cast<size_t>(i)];
        // Cells [first, pos]; the softmax's chunks of 16 start at a multiple of 16, as in
        // llama.cpp's row of all cells, so the row starts there with masked (-inf) entries.
        const int64_t first = firstCell(t, window);
        const int64_t start = first & ~int64_t{15};
        const int64_t len = t.pos + 1 - start, cells = t.pos + 1 - first;
        const auto* k0 =
            reinterpret_cast<const float*>(reinterpret_cast<const unsigned char*>(krow0) +
                                           static_cast<size_t>(first - qb.lo) * stride);
        const auto* v0 =
            transposed
                ? nullptr
                : reinterpret_cast<const float*>(reinterpret_cast<const unsigned char*>(vrow0) +
                                                 static_cast<size_t>(first - qb.lo) * stride);
        // The job's heads share the cells: their scores in one pass over the K rows.
        scores.assign(static_cast<size_t>(nh * len), -INFINITY);
        if (in_place) {
          scoresPrefetching(hd, q_.data() + i * nq + head0 * hd, nh, k0, v0, stride, cells, scale,
                            scores.data() + (first - start), len);
        } else {
          kernels::ggml::scoresHeads(hd, q_.data() + i * nq + head0 * hd, nh, k0, stride, cells,
                                     scale, scores.data() + (first - start), len);
        }
        for (int64_t g = 0; g < nh; ++g) kernels::softmax(scores.data() + g * len, len);
        if (transposed) {
          kernels::ggml::weightedRowSumHeadsT(scores.data() + (first - start), len, nh,
                                              vcol0 + (first - qb.lo), span, cells, hd,
                                              attn_.data() + i * nq + head0 * hd);
        } else {
          kernels::ggml::weightedRowSumHeads(order, scores.data() + (first - start), len, nh, v0,
                                             stride, cells, hd, lanes.data(),
                                             attn_.data() + i * nq + head0 * hd);
        }
      }
    }
  });
}

int64_t LlamaRank::firstCell(const BatchToken& t, int64_t window) {
  return window > 0 ? std::max<int64_t>(0, t.pos + 1 - window) : int64_t{0};
}

std::vector<LlamaRank::QueryBlock> LlamaRank::queryBlocks(std::span<const BatchToken> batch,
                                                          int64_t window) {
  std::vector<QueryBlock> blocks;
  for (int64_t i = 0; i < static_cast<int64_t>(batch.size()); ++i) {
    const BatchToken& t = batch[static_cast<size_t>(i)];
    if (!blocks.empty()) {
      QueryBlock& qb = blocks.back();
      const BatchToken& prev = batch[static_cast<size_t>(i - 1)];
      if (i - qb.begin < kQueryBlock && sameSequence(prev, t) && t.pos == prev.pos + 1) {
        qb.end = i + 1;
        qb.lo = std::min(qb.lo, firstCell(t, window));
        qb.hi = t.pos;
        continue;
      }
    }
    blocks.push_back({i, i + 1, firstCell(t, window), t.pos});
  }
  return blocks;
}

}  // namespace tpnode::model
