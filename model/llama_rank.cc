// LlamaRank: batch setup, embeddings, the layer loop and the output head.
#include "model/llama_rank.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/check.h"
#include "common/error.h"
#include "model/kernels/cpu/gelu.h"
#include "model/kernels/cpu/matmul.h"
#include "model/kernels/cpu/ops.h"

namespace tpnode::model {

LlamaRank::LlamaRank(const ModelConfig& config, RankWeights weights,
                     collectives::Communicator& comm, kernels::ThreadPool& pool, int64_t n_slots,
                     int64_t n_ctx, int64_t kv_block_size, int64_t kv_blocks)
    : config_(config),
      weights_(std::move(weights)),
      comm_(comm),
      pool_(pool),
      kv_(weights_.layer_end - weights_.layer_begin, n_slots, n_ctx, weights_.n_head_kv,
          config.head_dim, weights_.layer_begin, kv_block_size, kv_blocks) {
  if (config_.isMoe()) moe_ = std::make_unique<MoeFfn>(config_, pool_);
  if (config_.ffn_act == FfnAct::kGeluTanh) kernels::gegluPrepare();
  if (weights_.needsTiedHeadSlice()) {
    // Tied head, vocab-parallel: keep this rank's rows of the replicated token_embd. The copy is
    // the head's alone, so it can take the projections' kernel layout: a batch of logits rows
    // (serving: one per running sequence) then runs on the GEMM tiles instead of one dot product
    // per row and token.
    head_slice_ = kernels::packWeights(tiedHeadSlice(weights_));
  }
}

namespace {

// v holds at least n values (value-initialized, so every page is written once now).
template <typename V>
void commit(V& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

}  // namespace

void LlamaRank::reserveBatch(int64_t tokens) {
  if (tokens <= 0) return;
  const auto n = static_cast<size_t>(tokens);
  const auto dim = static_cast<size_t>(config_.n_embd), hd = static_cast<size_t>(config_.head_dim);
  const size_t nq = static_cast<size_t>(weights_.n_head) * hd;
  const size_t nkv = static_cast<size_t>(weights_.n_head_kv) * hd;
  for (auto* v : {&x_, &h_, &o_}) commit(*v, n * dim);
  commit(q_, n * nq);
  commit(attn_, n * nq);
  commit(k_, n * nkv);
  commit(v_, n * nkv);
  if (!moe_) {
    commit(gate_, n * static_cast<size_t>(weights_.n_ff));
    commit(up_, n * static_cast<size_t>(weights_.n_ff));
  }
  // One fresh sequence of `tokens` positions: attend's copy of its cells (when within budget).
  if (2 * n * nkv * sizeof(float) <= shared_rows_budget_) {
    commit(shared_k_, n * nkv);
    commit(shared_v_, n * nkv);
  }
  for (RopeAngles& r : rope_angles_) {  // capacity only: an empty entry matches no batch
    commit(r.positions, n);
    commit(r.cs, n * static_cast<size_t>(config_.n_rot));
    r.positions.clear();
    r.cs.clear();
  }
  const int64_t local = weights_.vocab_end - weights_.vocab_begin;
  if (local > 0 && local < config_.n_vocab) {  // vocab-parallel head: one row (a prompt's last)
    commit(logits_local_, static_cast<size_t>(local));
    commit(gathered_, static_cast<size_t>(config_.n_vocab));
  }
  size_t scratch = 0;
  for (const LayerWeights& w : weights_.layers) {
    for (const Matrix* m : {&w.wq, &w.wk, &w.wv, &w.wo, &w.w_gate, &w.w_up, &w.w_down}) {
      if (!m->empty()) scratch = std::max(scratch, kernels::matmulScratchBytes(*m, tokens));
    }
  }
  commit(quant_scratch_.bytes, scratch);
}

void LlamaRank::matmul(const Matrix& w, const float* x, int64_t n, float* y, bool same_x) {
  kernels::matmul(w, x, n, y, w.rows, pool_, quant_scratch_, same_x);
}

void LlamaRank::allReduce(float* data, size_t count) {
  if (comm_.size() > 1) comm_.allReduceSum(data, count, collectives::DType::kF32);
}

void LlamaRank::tap(TapSink* sink, int64_t layer, TapPoint point, const std::vector<float>& rows,
                    std::span<const BatchToken> batch) const {
  if (sink == nullptr) return;
  const int64_t dim = config_.n_embd;
  for (size_t s = 0; s < sink->specs.size(); ++s) {
    if (sink->specs[s].layer != layer || sink->specs[s].point != point) continue;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!batch[i].tap) continue;
      const float* row = rows.data() + static_cast<int64_t>(i) * dim;
      sink->rows[s].insert(sink->rows[s].end(), row, row + dim);
    }
  }
}

void LlamaRank::forward(std::span<const BatchToken> batch, std::vector<float>& logits,
                        TapSink* taps) {
  const int64_t n = static_cast<int64_t>(batch.size());
  TP_CHECK(
      weights_.embeddings && weights_.layer_begin == 0 && weights_.layer_end == config_.n_layer,
      "forward() needs the whole model; a pipeline stage runs forwardLayers()");
  checkBatch(batch, config_.n_vocab, kv_.slots(), kv_.ctx());
  checkKvTables(batch);
  embed(batch);
  if (taps != nullptr) {
    taps->rows.assign(taps->specs.size(), {});
  }
  for (int64_t l = 0; l < config_.n_layer; ++l) {
    if (l + 1 < config_.n_layer) {
      attentionBlock(l, batch);
      tap(taps, l, TapPoint::kAttnOut, o_, batch);  // o_: the block's all-reduced output
      ffnBlock(l, n);
    } else {
      batch = lastAttentionBlock(l, batch);  // from here on the rows whose output is read
      tap(taps, l, TapPoint::kAttnOut, o_, batch);
      lastFfnBlock(l, n);
    }
    tap(taps, l, TapPoint::kMlpOut, o_, batch);
    tap(taps, l, TapPoint::kResidual, x_, batch);
  }
  head(batch, logits);
  softcap(logits);
}

void LlamaRank::embed(std::span<const BatchToken> batch) {
  const int64_t dim = config_.n_embd;
  x_.resize(batch.size() * static_cast<size_t>(dim));
  pool_.parallelFor(static_cast<int64_t>(batch.size()), 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float* row = x_.data() + i * dim;
      kernels::dequantizeMatrixRow(weights_.token_embd, batch[static_cast<size_t>(i)].token, row);
      if (config_.embd_scale > 0) {  // gemma3: embeddings * sqrt(n_embd)
        for (int64_t j = 0; j < dim; ++j) row[j] *= config_.embd_scale;
      }
    }
  });
}

void LlamaRank::normRows(const float* x, const std::vector<float>& w, float* y, int64_t n,
                         int64_t rows) {
  pool_.parallelFor(rows, 1, [&](int64_t b, int64_t e) {
    kernels::rmsNormRows(x + b * n, w.data(), y + b * n, n, e - b, config_.rms_eps);
  });
}

namespace {

// x[i] += o[i] for i < n; x and o do not overlap (restrict: the compiler adds a vector at a time,
// the same sums).
void addInto(float* __restrict x, const float* __restrict o, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) x[i + k] += o[i + k];
  }
  for (; i < n; ++i) x[i] += o[i];
}

}  // namespace

void LlamaRank::residual(const std::vector<float>& post_norm, int64_t n_tokens) {
  const int64_t dim = config_.n_embd;
  pool_.parallelFor(n_tokens, 1, [&](int64_t b, int64_t e) {
    float* o = o_.data() + b * dim;
    if (!post_norm.empty()) {
      kernels::rmsNormRows(o, post_norm.data(), o, dim, e - b, config_.rms_eps);
    }
    addInto(x_.data() + b * dim, o, (e - b) * dim);
  });
}

void LlamaRank::softcap(std::vector<float>& logits) {
  if (config_.logit_softcap > 0) {  // final logit softcapping (gemma)
    const float c = config_.logit_softcap;
    pool_.parallelFor(static_cast<int64_t>(logits.size()), 4096, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        float& v = logits[static_cast<size_t>(i)];
        v = c * std::tanh(v / c);
      }
    });
  }
}

void LlamaRank::head(std::span<const BatchToken> batch, std::vector<float>& logits) {
  const int64_t dim = config_.n_embd;
  const int64_t local = weights_.vocab_end - weights_.vocab_begin;
  const int64_t vocab = config_.n_vocab;
  const bool root = comm_.rank() == 0;  // only global rank 0 (the driver's sampler) gets logits
  logits.clear();
  if (local == vocab && !root) return;  // replicated head: rank 0 alone computes logits
  out_rows_.clear();                    // batch positions of the rows that get logits
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].logits) out_rows_.push_back(static_cast<int64_t>(i));
  }
  const auto n_out = static_cast<int64_t>(out_rows_.size());
  if (n_out == 0) return;
  h_.resize(x_.size());
  pool_.parallelFor(n_out, 1, [&](int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j) {
      kernels::rmsNorm(x_.data() + out_rows_[static_cast<size_t>(j)] * dim,
                       weights_.output_norm.data(), h_.data() + j * dim, dim, config_.rms_eps);
    }
  });
  const Matrix& w = weights_.head();
  if (local == vocab) {  // replicated head, on rank 0
    logits.resize(static_cast<size_t>(n_out * vocab));
    kernels::matmul(w, h_.data(), n_out, logits.data(), vocab, pool_, quant_scratch_, false);
    return;
  }
  // Vocab-parallel: this rank's rows of the head (of token_embd when tied), gathered to rank 0.
  const Matrix* part = head_slice_.empty() ? &w : &head_slice_;
  logits_local_.resize(static_cast<size_t>(n_out * local));
  kernels::matmul(*part, h_.data(), n_out, logits_local_.data(), local, pool_, quant_scratch_,
                  false);
  gathered_.resize(static_cast<size_t>(n_out * vocab));
  comm_.gather(logits_local_.data(), gathered_.data(), logits_local_.size(),
               collectives::DType::kF32, 0);
  if (!root) return;
  logits.resize(static_cast<size_t>(n_out * vocab));
  const int tp = comm_.size();
  for (int r = 0; r < tp; ++r) {
    for (int64_t i = 0; i < n_out; ++i) {
      std::copy_n(gathered_.data() + (r * n_out + i) * local, local,
                  logits.data() + i * vocab + r * local);
    }
  }
}

void LlamaRank::checkKvTables(std::span<const BatchToken> batch) const {
  model::checkKvTables(batch, kv_.blockSize(), kv_.blocks(), kv_.slotBlocks());
}

void checkKvTables(std::span<const BatchToken> batch, int64_t block_size, int64_t n_blocks,
                   int64_t slot_blocks) {
  for (const BatchToken& t : batch) {
    if (t.blocks.empty()) {  // the slot's own blocks (checkBatch checked the slot)
      if (t.slot * slot_blocks + t.pos / block_size >= n_blocks) {
        fail(ErrorCode::kInvalidArgument,
             "slot {} has no blocks of its own in a cache of {} KV blocks (send a block table)",
             t.slot, n_blocks);
      }
      continue;
    }
    const int64_t need = t.pos / block_size + 1;
    if (static_cast<int64_t>(t.blocks.size()) < need) {
      fail(ErrorCode::kInvalidArgument, "position {} needs {} KV blocks, its table has {}", t.pos,
           need, t.blocks.size());
    }
    for (int64_t i = 0; i < need; ++i) {
      if (t.blocks[static_cast<size_t>(i)] >= static_cast<uint64_t>(n_blocks)) {
        fail(ErrorCode::kInvalidArgument, "KV block {} is outside [0, {})",
             t.blocks[static_cast<size_t>(i)], n_blocks);
      }
    }
  }
}

void checkBatch(std::span<const BatchToken> batch, int64_t n_vocab, int64_t n_slots,
                int64_t n_ctx) {
  for (const BatchToken& t : batch) {
    if (t.token < 0 || t.token >= n_vocab) {
      fail(ErrorCode::kInvalidArgument, "token id {} is outside the vocabulary of {}", t.token,
           n_vocab);
    }
    if (t.slot < 0 || t.slot >= n_slots) {
      fail(ErrorCode::kInvalidArgument, "sequence slot {} is outside [0, {})", t.slot, n_slots);
    }
    if (t.pos < 0 || t.pos >= n_ctx) {
      fail(ErrorCode::kResource, "position {} is outside the context of {} tokens", t.pos, n_ctx);
    }
  }
}

}  // namespace tpnode::model
