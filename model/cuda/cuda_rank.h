// CudaRank: one tensor-parallel rank of a Llama-family decoder (llama, qwen2, qwen3, gemma3) on
// one GPU: the same forward pass as LlamaRank (model/llama_rank.h), with its weight shard, KV
// cache and activations in that GPU's memory and the kernels of model/kernels/cuda/.
//
// Contract
// - Construction uploads the rank's shard (plain row layout: loadRankWeights(..., pack=false))
//   to `device` and allocates the KV cache there; it runs on any thread and leaves `device`
//   current on it. The host copy of the shard is kept for tensor reads (weights()).
// - The KV cache is paged as the CPU ranks' (model/kv_cache.h): kv_blocks blocks of
//   kv_block_size positions; a token with a block table reads and writes its sequence's
//   positions through it, one without uses its slot's own blocks. Each step uploads the
//   batch's tables (one per sequence) with the batch. pagedKvCache() exports and imports one
//   block's shard in the CPU ranks' layout (device <-> host copies, on the rank's thread).
// - forward() is called by one thread at a time (the rank's); it makes `device` current,
//   enqueues the pass on the rank's own stream and returns when the logits are on the host.
// - All-reduces go through `device_comm` (device memory, on the rank's stream); the logits
//   gather of a vocab-parallel head and nothing else goes through `host_comm`. Both must
//   outlive the rank and belong to the same group; `device_comm` may be null when the group
//   has one rank.
// - TPNODE_CUDA_PROFILE=1 times the phases of each decode step with CUDA events (graphs off
//   meanwhile) and logs the breakdown when the rank is destroyed.
// - CUDA graphs (options.graphs): a batch of at most kMaxGraphTokens tokens without taps is
//   captured once per (tokens, logits rows) shape and replayed afterwards; token ids,
//   positions and slots live in device arrays that each step overwrites, so the graph stays
//   valid. When the all-reduce cannot be captured (host staging) the pass is captured as one
//   graph per stretch between all-reduces. --cuda-graphs off (or TPNODE_CUDA_GRAPHS=0, read
//   once by node/ through the settings table) sets options.graphs false.
// - Pipeline stages (weights loaded with a StagePart, model/stage_plan.h): the rank uploads
//   only its stage's layers (and the embeddings and head on the first stage) and keeps a KV
//   cache for those layers; forwardLayers() and forwardHead() run a step's part as LlamaRank's
//   do, the hidden rows passing through host memory. forward() needs the whole model. Decode
//   steps of forwardLayers() use CUDA graphs as forward() does; forwardHead() runs direct.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/cuda/device_comm.h"
#include "model/config.h"
#include "model/cuda/device_memory.h"
#include "model/cuda/step_profile.h"
#include "model/kernels/cuda/kernels.h"
#include "model/kv_cache.h"
#include "model/rank_model.h"
#include "model/weights.h"

namespace tpnode::model::cuda {

struct CudaRankOptions {
  int device = 0;
  int64_t n_slots = 1;
  int64_t n_ctx = 2048;
  int64_t kv_block_size = kDefaultKvBlockSize;
  int64_t kv_blocks = 0;  // 0: n_slots x kvBlocksFor(n_ctx, kv_block_size) (set so at upload)
  bool graphs = true;
  // The device communicator's limit per call (DeviceGroup's max_count); larger all-reduces
  // (long prefills) are issued in pieces of at most this many floats. 0: no limit.
  size_t max_allreduce_floats = 0;
};

class CudaRank final : public RankModel, private KvBlockIo {
 public:
  static constexpr int64_t kMaxGraphTokens = 8;

  CudaRank(const ModelConfig& config, RankWeights weights, collectives::Communicator& host_comm,
           collectives::cuda::DeviceComm* device_comm, const CudaRankOptions& options);
  ~CudaRank() override;
  CudaRank(const CudaRank&) = delete;
  CudaRank& operator=(const CudaRank&) = delete;

  void forward(std::span<const BatchToken> batch, std::vector<float>& logits,
               TapSink* taps = nullptr) override;
  void forwardLayers(std::span<const BatchToken> batch, const float* hidden_in,
                     std::vector<float>& hidden_out, TapSink* taps = nullptr) override;
  void forwardHead(std::span<const BatchToken> batch, const float* rows,
                   std::vector<float>& logits) override;
  const ModelConfig& config() const override { return config_; }
  const RankWeights& weights() const override { return weights_; }
  uint64_t kvBytes() const override { return k_cache_.bytes() + v_cache_.bytes(); }
  KvBlockIo* pagedKvCache() override { return this; }
  uint64_t deviceBytes() const override;
  std::string backend() const override { return "cuda:" + std::to_string(options_.device); }
  int64_t graphsCaptured() const { return graphs_captured_; }

 private:
  struct DeviceLayer {
    DeviceMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
    DeviceArray<float> attn_norm, ffn_norm, q_norm, k_norm, attn_post_norm, ffn_post_norm;
    DeviceArray<float> bq, bk, bv;
  };
  class Runner;  // direct / capturing / replaying execution of one pass (cuda_rank.cc)
  // One captured stretch of work per segment; segments are separated by all-reduces that cannot
  // be captured.
  // An empty segment (no work between two all-reduces) is kept as a null entry, so that replay
  // walks the same sequence as the capture.
  struct Graph {
    std::vector<cudaGraphExec_t> execs;
    bool complete = false;  // a whole pass was captured (a failed capture is redone)
    ~Graph() { clear(); }
    void clear() {
      for (cudaGraphExec_t e : execs) {
        if (e != nullptr) (void)cudaGraphExecDestroy(e);
      }
      execs.clear();
    }
  };

  size_t blockFloats() const override;
  void exportBlock(int64_t block, std::span<float> out) const override;
  void importBlock(int64_t block, std::span<const float> in) override;

  // Blocks a slot owns when its tokens carry no table.
  int64_t slotBlocks() const { return kvBlocksFor(options_.n_ctx, options_.kv_block_size); }
  void upload();
  void ensureCapacity(int64_t n_tokens);
  // Token ids, positions, table offsets and logits rows of the batch, and its block tables,
  // to the device; returns the number of logits rows.
  int64_t uploadBatch(std::span<const BatchToken> batch);
  Graph* graphFor(int64_t n, int64_t key, const TapSink* taps);
  void layers(Runner& run, int64_t n, TapSink* taps, std::span<const BatchToken> batch);
  void attentionBlock(Runner& run, int64_t layer, int64_t n, TapSink* taps,
                      std::span<const BatchToken> batch);
  void ffnBlock(Runner& run, int64_t layer, int64_t n, TapSink* taps,
                std::span<const BatchToken> batch);
  // The output norm and head on the batch rows marked `logits` (gathered from x_), or, with
  // rows_in_hx, on the n_out rows already in hx_ (forwardHead).
  void head(Runner& run, int64_t n_out, bool rows_in_hx = false);
  void collectLogits(int64_t n_out, std::vector<float>& logits);
  void matmul(const DeviceMatrix& w, const float* x, int64_t n, float* y);
  void tap(TapSink* sink, int64_t layer, TapPoint point, const float* rows,
           std::span<const BatchToken> batch);
  KvView kvView() const;

  ModelConfig config_;
  RankWeights weights_;
  collectives::Communicator& host_comm_;
  collectives::cuda::DeviceComm* device_comm_;
  CudaRankOptions options_;
  cudaStream_t stream_ = nullptr;

  // Weights on the device.
  std::vector<DeviceMatrix> matrices_;  // every uploaded matrix, freed by the destructor
  DeviceMatrix token_embd_, head_;      // head_: output, the head slice, or token_embd (tied)
  DeviceArray<float> output_norm_, rope_freqs_;
  std::vector<DeviceLayer> layers_;
  DeviceArray<float> k_cache_, v_cache_;  // [local layer][block][offset][row]

  // Per-step state, sized for the largest batch so far (capacity_ tokens).
  int64_t capacity_ = 0;
  DeviceArray<float> x_, h_, q_, k_, v_, attn_, o_, gate_, up_, hx_, logits_local_;
  DeviceArray<int32_t> meta_;  // [4][capacity]: tokens, positions, table offsets, logits rows
  PinnedArray<int32_t> meta_host_;
  // The step's block tables back to back (KvView::tables); a fixed address that graphs read,
  // grown (and the graphs dropped) when a step's tables do not fit.
  DeviceArray<int32_t> tables_;
  PinnedArray<int32_t> tables_host_;
  PinnedArray<float> logits_host_;
  DeviceArray<uint8_t> workspace_;
  std::vector<float> gathered_;

  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<Graph>> graphs_;
  int64_t graphs_captured_ = 0;
  // TPNODE_CUDA_PROFILE=1: decode steps run without graphs and are timed phase by phase; the
  // destructor logs the breakdown (step_profile.h).
  std::unique_ptr<StepProfile> profile_;
  StepProfile* prof_ = nullptr;  // profile_ during a profiled step, else null
  void mark(const char* phase) {
    if (prof_ != nullptr) prof_->mark(phase);
  }
};

}  // namespace tpnode::model::cuda
