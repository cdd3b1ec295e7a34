// CudaRank's forward pass: batch metadata upload, the layer loop (same order of operations as
// LlamaRank), the head and the logits gather; CUDA graph capture and replay of decode steps.
#include "model/cuda/cuda_rank.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "common/check.h"
#include "common/error.h"
#include "common/settings.h"

#include <spdlog/spdlog.h>

namespace tpnode::model::cuda {

// Runs a pass in one of three modes:
//   direct   every step's kernels are enqueued as they come;
//   capture  the steps of each segment are recorded into a graph, which is then launched;
//   replay   the steps are skipped and each segment's graph is launched.
// A segment ends at an all-reduce that cannot be captured and at finish().
class CudaRank::Runner {
 public:
  Runner(CudaRank& rank, Graph* graph) : rank_(rank), graph_(graph) {
    if (graph_ == nullptr) return;
    replay_ = graph_->complete;
    if (!replay_) graph_->clear();
  }

  template <typename F>
  void step(F&& f) {
    if (graph_ != nullptr && replay_) return;
    if (graph_ != nullptr && !capturing_) {
      TP_CUDA(cudaStreamBeginCapture(rank_.stream_, cudaStreamCaptureModeThreadLocal));
      capturing_ = true;
    }
    f();
  }

  void allReduce(float* data, size_t count) {
    collectives::cuda::DeviceComm* comm = rank_.device_comm_;
    if (comm == nullptr || comm->size() == 1) return;
    const size_t piece =
        rank_.options_.max_allreduce_floats > 0 ? rank_.options_.max_allreduce_floats : count;
    auto reduce = [&] {
      for (size_t off = 0; off < count; off += piece) {
        comm->allReduceSum(data + off, std::min(piece, count - off), rank_.stream_);
      }
    };
    if (graph_ != nullptr && comm->capturable()) {
      step(reduce);
      return;
    }
    endSegment();
    reduce();
  }

  void finish() {
    endSegment();
    if (graph_ != nullptr) graph_->complete = true;
  }

 private:
  void endSegment() {
    if (graph_ == nullptr) return;
    if (replay_) {
      TP_CHECK(next_ < graph_->execs.size(), "graph segment {} of {} missing", next_,
               graph_->execs.size());
      cudaGraphExec_t exec = graph_->execs[next_++];
      if (exec != nullptr) TP_CUDA(cudaGraphLaunch(exec, rank_.stream_));
      return;
    }
    if (!capturing_) {  // an empty segment
      graph_->execs.push_back(nullptr);
      ++next_;
      return;
    }
    capturing_ = false;
    cudaGraph_t g = nullptr;
    TP_CUDA(cudaStreamEndCapture(rank_.stream_, &g));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t err = cudaGraphInstantiate(&exec, g, 0);
    (void)cudaGraphDestroy(g);
    TP_CUDA(err);
    graph_->execs.push_back(exec);
    ++next_;
    TP_CUDA(cudaGraphLaunch(exec, rank_.stream_));
  }

  CudaRank& rank_;
  Graph* graph_;
  bool replay_ = false;
  bool capturing_ = false;
  size_t next_ = 0;
};

CudaRank::~CudaRank() {
  if (profile_ && profile_->steps() > 0) {
    spdlog::info("[gpu] rank {} on cuda:{} decode profile: {}", host_comm_.rank(), options_.device,
                 profile_->report());
  }
  (void)cudaSetDevice(options_.device);
  if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
  graphs_.clear();
  for (DeviceMatrix& m : matrices_) freeMatrix(m);
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

void CudaRank::ensureCapacity(int64_t n) {
  if (n <= capacity_) return;
  TP_CUDA(cudaStreamSynchronize(stream_));
  graphs_.clear();  // the graphs hold the old buffers' addresses
  const int64_t cap = std::max<int64_t>(n, 8);
  const int64_t dim = config_.n_embd, hd = config_.head_dim;
  const size_t c = static_cast<size_t>(cap);
  x_.resize(c * dim);
  h_.resize(c * dim);
  o_.resize(c * dim);
  hx_.resize(c * dim);
  q_.resize(c * weights_.n_head * hd);
  attn_.resize(c * weights_.n_head * hd);
  k_.resize(c * weights_.n_head_kv * hd);
  v_.resize(c * weights_.n_head_kv * hd);
  gate_.resize(c * weights_.n_ff);
  up_.resize(c * weights_.n_ff);
  const int64_t local = weights_.vocab_end - weights_.vocab_begin;
  logits_local_.resize(c * local);
  logits_host_.resize(c * local);
  meta_.resize(4 * c);
  meta_host_.resize(4 * c);
  capacity_ = cap;
}

void CudaRank::matmul(const DeviceMatrix& w, const float* x, int64_t n, float* y) {
  cuda::matmul(w, x, n, y, w.rows, workspace_.get(), workspace_.bytes(), stream_);
}

void CudaRank::tap(TapSink* sink, int64_t layer, TapPoint point, const float* rows,
                   std::span<const BatchToken> batch) {
  if (sink == nullptr) return;
  const int64_t dim = config_.n_embd;
  std::vector<float> host;
  for (size_t s = 0; s < sink->specs.size(); ++s) {
    if (sink->specs[s].layer != layer || sink->specs[s].point != point) continue;
    if (host.empty()) {
      host.resize(batch.size() * static_cast<size_t>(dim));
      TP_CUDA(cudaMemcpyAsync(host.data(), rows, host.size() * sizeof(float),
                              cudaMemcpyDeviceToHost, stream_));
      TP_CUDA(cudaStreamSynchronize(stream_));
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!batch[i].tap) continue;
      const float* row = host.data() + static_cast<int64_t>(i) * dim;
      sink->rows[s].insert(sink->rows[s].end(), row, row + dim);
    }
  }
}

int64_t CudaRank::uploadBatch(std::span<const BatchToken> batch) {
  checkKvTables(batch, options_.kv_block_size, options_.kv_blocks, slotBlocks());
  // The batch's tables, one per sequence: tokens of one sequence carry the same table (a span
  // into the step's command) or none (their slot's own blocks).
  struct Table {
    const uint32_t* data;  // null: the slot's own blocks
    size_t size;
    int32_t slot;
    int32_t offset;
  };
  std::vector<Table> tables;
  std::vector<int32_t> offsets(batch.size());
  size_t entries = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const BatchToken& t = batch[i];
    const bool own = t.blocks.empty();
    const uint32_t* data = own ? nullptr : t.blocks.data();
    const size_t size = own ? static_cast<size_t>(slotBlocks()) : t.blocks.size();
    auto same = [&](const Table& x) {
      return x.data == data && x.size == size && (!own || x.slot == t.slot);
    };
    auto found = std::find_if(tables.begin(), tables.end(), same);
    if (found == tables.end()) {
      tables.push_back({data, size, t.slot, static_cast<int32_t>(entries)});
      entries += size;
      found = tables.end() - 1;
    }
    offsets[i] = found->offset;
  }
  if (entries > tables_.size()) {  // the graphs hold the old array's address
    TP_CUDA(cudaStreamSynchronize(stream_));
    graphs_.clear();
    tables_.resize(entries);
    tables_host_.resize(entries);
  }
  int32_t* th = tables_host_.get();
  for (const Table& x : tables) {
    for (size_t j = 0; j < x.size; ++j) {
      th[static_cast<size_t>(x.offset) + j] =
          x.data != nullptr ? static_cast<int32_t>(x.data[j])
                            : static_cast<int32_t>(x.slot * slotBlocks() + static_cast<int64_t>(j));
    }
  }
  if (entries > 0) {
    TP_CUDA(cudaMemcpyAsync(tables_.get(), th, entries * sizeof(int32_t), cudaMemcpyHostToDevice,
                            stream_));
  }
  // Batch metadata: [tokens][positions][table offsets][rows with logits], one copy per step.
  // The graphs read these arrays, so a replay sees this step's values.
  int32_t* m = meta_host_.get();
  const size_t cap = static_cast<size_t>(capacity_);
  int64_t n_out = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const BatchToken& t = batch[i];
    m[i] = t.token;
    m[cap + i] = t.pos;
    m[2 * cap + i] = offsets[i];
    if (t.logits) m[3 * cap + static_cast<size_t>(n_out++)] = static_cast<int32_t>(i);
  }
  TP_CUDA(cudaMemcpyAsync(meta_.get(), m, meta_.bytes(), cudaMemcpyHostToDevice, stream_));
  return n_out;
}

// The graph of a batch of n tokens under `key` (forward(): its logits rows; forwardLayers():
// -1), or null when the batch runs direct (graphs off, taps, a long batch, a profiled step).
CudaRank::Graph* CudaRank::graphFor(int64_t n, int64_t key, const TapSink* taps) {
  if (prof_ != nullptr || !options_.graphs || taps != nullptr || n > kMaxGraphTokens) {
    return nullptr;
  }
  std::unique_ptr<Graph>& g = graphs_[{n, key}];
  if (!g) g = std::make_unique<Graph>();
  if (!g->complete) ++graphs_captured_;
  return g.get();
}

void CudaRank::layers(Runner& run, int64_t n, TapSink* taps, std::span<const BatchToken> batch) {
  for (int64_t l = weights_.layer_begin; l < weights_.layer_end; ++l) {
    attentionBlock(run, l, n, taps, batch);
    ffnBlock(run, l, n, taps, batch);
  }
}

void CudaRank::forward(std::span<const BatchToken> batch, std::vector<float>& logits,
                       TapSink* taps) {
  TP_CHECK(
      weights_.embeddings && weights_.layer_begin == 0 && weights_.layer_end == config_.n_layer,
      "forward() needs the whole model; a pipeline stage runs forwardLayers()");
  checkBatch(batch, config_.n_vocab, options_.n_slots, options_.n_ctx);
  const int64_t n = static_cast<int64_t>(batch.size());
  logits.clear();
  if (n == 0) return;
  TP_CUDA(cudaSetDevice(options_.device));
  ensureCapacity(n);
  const int64_t n_out = uploadBatch(batch);
  if (taps != nullptr) taps->rows.assign(taps->specs.size(), {});

  static const bool profiling = [] {
    return settings::envValue("TPNODE_CUDA_PROFILE").value_or("") == "1";
  }();
  prof_ = nullptr;
  if (profiling && n <= kMaxGraphTokens) {
    if (!profile_) profile_ = std::make_unique<StepProfile>();
    prof_ = profile_.get();
    prof_->begin(stream_);
  }
  Runner run(*this, graphFor(n, n_out, taps));
  const int32_t* tokens = meta_.get();
  run.step([&] {
    embed(token_embd_, tokens, n, config_.embd_scale > 0 ? config_.embd_scale : 1.f, x_.get(),
          stream_);
    mark("embed");
  });
  layers(run, n, taps, batch);
  head(run, n_out);
  run.finish();
  collectLogits(n_out, logits);
  if (prof_ != nullptr) {
    mark("logits to host");
    prof_->end();
    prof_ = nullptr;
  }
}

void CudaRank::forwardLayers(std::span<const BatchToken> batch, const float* hidden_in,
                             std::vector<float>& hidden_out, TapSink* taps) {
  checkBatch(batch, config_.n_vocab, options_.n_slots, options_.n_ctx);
  TP_CHECK(taps == nullptr || taps->rows.size() == taps->specs.size(),
           "a tap sink of {} specs holds {} row sets", taps->specs.size(), taps->rows.size());
  TP_CHECK(hidden_in != nullptr || weights_.embeddings,
           "the first stage's ranks hold the token embeddings");
  const int64_t n = static_cast<int64_t>(batch.size());
  const int64_t dim = config_.n_embd;
  hidden_out.clear();
  if (n == 0) return;
  TP_CUDA(cudaSetDevice(options_.device));
  ensureCapacity(n);
  uploadBatch(batch);
  const size_t bytes = static_cast<size_t>(n * dim) * sizeof(float);
  // The previous stage's rows go in before the pass (outside a graph: x_ keeps its address).
  if (hidden_in != nullptr) {
    TP_CUDA(cudaMemcpyAsync(x_.get(), hidden_in, bytes, cudaMemcpyHostToDevice, stream_));
  }
  Runner run(*this, graphFor(n, -1, taps));
  if (hidden_in == nullptr) {
    const int32_t* tokens = meta_.get();
    run.step([&] {
      embed(token_embd_, tokens, n, config_.embd_scale > 0 ? config_.embd_scale : 1.f, x_.get(),
            stream_);
    });
  }
  layers(run, n, taps, batch);
  run.finish();
  hidden_out.resize(static_cast<size_t>(n * dim));
  TP_CUDA(cudaMemcpyAsync(hidden_out.data(), x_.get(), bytes, cudaMemcpyDeviceToHost, stream_));
  TP_CUDA(cudaStreamSynchronize(stream_));
}

void CudaRank::forwardHead(std::span<const BatchToken> batch, const float* rows,
                           std::vector<float>& logits) {
  TP_CHECK(weights_.embeddings, "the first stage's ranks hold the output head");
  logits.clear();
  int64_t n_out = 0;
  for (const BatchToken& t : batch) n_out += t.logits ? 1 : 0;
  if (n_out == 0) return;
  TP_CUDA(cudaSetDevice(options_.device));
  ensureCapacity(n_out);
  TP_CUDA(cudaMemcpyAsync(hx_.get(), rows,
                          static_cast<size_t>(n_out * config_.n_embd) * sizeof(float),
                          cudaMemcpyHostToDevice, stream_));
  Runner run(*this, nullptr);
  head(run, n_out, /*rows_in_hx=*/true);
  run.finish();
  collectLogits(n_out, logits);
}

void CudaRank::attentionBlock(Runner& run, int64_t l, int64_t n, TapSink* taps,
                              std::span<const BatchToken> batch) {
  const DeviceLayer& w = layers_[static_cast<size_t>(l)];
  const int64_t dim = config_.n_embd, hd = config_.head_dim;
  const int64_t heads = weights_.n_head, kv_heads = weights_.n_head_kv;
  const int64_t nq = heads * hd, nkv = kv_heads * hd;
  const size_t cap = static_cast<size_t>(capacity_);
  const int32_t* positions = meta_.get() + cap;
  const int32_t* tables = meta_.get() + 2 * cap;  // each token's table offset
  run.step([&] {
    rmsNorm(x_.get(), w.attn_norm.get(), h_.get(), n, dim, config_.rms_eps, stream_);
    mark("norms");
    matmul(w.wq, h_.get(), n, q_.get());
    matmul(w.wk, h_.get(), n, k_.get());
    matmul(w.wv, h_.get(), n, v_.get());
    mark("matmul");
    if (w.bq.size() > 0) {
      addBias(q_.get(), w.bq.get(), n, nq, stream_);
      addBias(k_.get(), w.bk.get(), n, nkv, stream_);
      addBias(v_.get(), w.bv.get(), n, nkv, stream_);
    }
    if (w.q_norm.size() > 0) {
      rmsNorm(q_.get(), w.q_norm.get(), q_.get(), n * heads, hd, config_.rms_eps, stream_);
    }
    if (w.k_norm.size() > 0) {
      rmsNorm(k_.get(), w.k_norm.get(), k_.get(), n * kv_heads, hd, config_.rms_eps, stream_);
    }
    const float* ff = rope_freqs_.size() > 0 ? rope_freqs_.get() : nullptr;
    rope(q_.get(), n, heads, hd, config_.n_rot, positions, config_.ropeBase(l),
         config_.ropeFreqScale(l), config_.rope_style, ff, stream_);
    rope(k_.get(), n, kv_heads, hd, config_.n_rot, positions, config_.ropeBase(l),
         config_.ropeFreqScale(l), config_.rope_style, ff, stream_);
    kvWrite(kvView(), l - weights_.layer_begin, k_.get(), v_.get(), n, tables, positions, stream_);
    mark("bias, qk norm, rope, kv write");
    const float scale =
        config_.attn_scale > 0 ? config_.attn_scale : 1.0f / std::sqrt(static_cast<float>(hd));
    const int64_t window = config_.isSwa(l) ? config_.n_swa : 0;
    attention(kvView(), l - weights_.layer_begin, q_.get(), attn_.get(), n, heads, kv_heads, hd,
              scale, window, tables, positions, options_.n_ctx, stream_);
    mark("attention");
    matmul(w.wo, attn_.get(), n, o_.get());
    mark("matmul");
  });
  run.allReduce(o_.get(), static_cast<size_t>(n * dim));
  mark("all-reduce");
  run.step([&] {
    if (w.attn_post_norm.size() > 0) {
      rmsNorm(o_.get(), w.attn_post_norm.get(), o_.get(), n, dim, config_.rms_eps, stream_);
    }
    add(x_.get(), o_.get(), n * dim, stream_);
    mark("norms");
  });
  if (taps != nullptr) tap(taps, l, TapPoint::kAttnOut, o_.get(), batch);
}

void CudaRank::ffnBlock(Runner& run, int64_t l, int64_t n, TapSink* taps,
                        std::span<const BatchToken> batch) {
  const DeviceLayer& w = layers_[static_cast<size_t>(l)];
  const int64_t dim = config_.n_embd, ff = weights_.n_ff;
  run.step([&] {
    rmsNorm(x_.get(), w.ffn_norm.get(), h_.get(), n, dim, config_.rms_eps, stream_);
    mark("norms");
    matmul(w.w_gate, h_.get(), n, gate_.get());
    matmul(w.w_up, h_.get(), n, up_.get());
    mark("matmul");
    gatedAct(gate_.get(), up_.get(), n * ff, config_.ffn_act, stream_);
    mark("gated activation");
    matmul(w.w_down, gate_.get(), n, o_.get());
    mark("matmul");
  });
  run.allReduce(o_.get(), static_cast<size_t>(n * dim));
  mark("all-reduce");
  run.step([&] {
    if (w.ffn_post_norm.size() > 0) {
      rmsNorm(o_.get(), w.ffn_post_norm.get(), o_.get(), n, dim, config_.rms_eps, stream_);
    }
    add(x_.get(), o_.get(), n * dim, stream_);
    mark("norms");
  });
  if (taps != nullptr) {
    tap(taps, l, TapPoint::kMlpOut, o_.get(), batch);
    tap(taps, l, TapPoint::kResidual, x_.get(), batch);
  }
}

void CudaRank::head(Runner& run, int64_t n_out, bool rows_in_hx) {
  const int64_t local = weights_.vocab_end - weights_.vocab_begin;
  const bool root = host_comm_.rank() == 0;
  if (n_out == 0 || (local == config_.n_vocab && !root)) return;
  const int64_t dim = config_.n_embd;
  const int32_t* rows = meta_.get() + 3 * static_cast<size_t>(capacity_);
  run.step([&] {
    if (!rows_in_hx) gatherRows(x_.get(), rows, n_out, dim, hx_.get(), stream_);
    rmsNorm(hx_.get(), output_norm_.get(), hx_.get(), n_out, dim, config_.rms_eps, stream_);
    mark("norms");
    matmul(head_, hx_.get(), n_out, logits_local_.get());
    mark("head matmul");
    // The softcap is element-wise, so each rank applies it to its own slice.
    if (config_.logit_softcap > 0) {
      softcap(logits_local_.get(), n_out * local, config_.logit_softcap, stream_);
    }
  });
}

void CudaRank::collectLogits(int64_t n_out, std::vector<float>& logits) {
  const int64_t local = weights_.vocab_end - weights_.vocab_begin;
  const int64_t vocab = config_.n_vocab;
  const bool root = host_comm_.rank() == 0;
  if (n_out == 0 || (local == vocab && !root)) {
    TP_CUDA(cudaStreamSynchronize(stream_));
    return;
  }
  const size_t count = static_cast<size_t>(n_out * local);
  TP_CUDA(cudaMemcpyAsync(logits_host_.get(), logits_local_.get(), count * sizeof(float),
                          cudaMemcpyDeviceToHost, stream_));
  TP_CUDA(cudaStreamSynchronize(stream_));
  if (local == vocab) {  // replicated head, on rank 0
    logits.assign(logits_host_.get(), logits_host_.get() + count);
    return;
  }
  gathered_.resize(static_cast<size_t>(n_out * vocab));
  host_comm_.gather(logits_host_.get(), gathered_.data(), count, collectives::DType::kF32, 0);
  if (!root) return;
  logits.resize(static_cast<size_t>(n_out * vocab));
  const int tp = host_comm_.size();
  for (int r = 0; r < tp; ++r) {
    for (int64_t i = 0; i < n_out; ++i) {
      std::copy_n(gathered_.data() + (r * n_out + i) * local, local,
                  logits.data() + i * vocab + r * local);
    }
  }
}

}  // namespace tpnode::model::cuda
