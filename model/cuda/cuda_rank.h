// CudaRank: one tensor-parallel rank of a Llama-family decoder (llama, qwen2, qwen3, gemma3) on
// one GPU: the same forward pass as LlamaRank (model/llama_rank.h), with its weight shard, KV
// cache and activations in that GPU's memory and the kernels of model/kernels/cuda/.
//
// Contract
// - Construction uploads the rank's shard (plain row layout: loadRankWeights(..., pack=false))
//   to `device` and allocates the KV cache there; it runs on any thread and leaves `device`
//   current on it. The host copy of the shard is kept for tensor reads (weights()).
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
#include "model/rank_model.h"
#include "model/weights.h"

namespace tpnode::model::cuda {

struct CudaRankOptions {
  int device = 0;
  int64_t n_slots = 1;
  int64_t n_ctx = 2048;
  bool graphs = true;
  // The device communicator's limit per call (DeviceGroup's max_count); larger all-reduces
  // (long prefills) are issued in pieces of at most this many floats. 0: no limit.
  size_t max_allreduce_floats = 0;
};

class CudaRank final : public RankModel {
 public:
  static constexpr int64_t kMaxGraphTokens = 8;

  CudaRank(const ModelConfig& config, RankWeights weights, collectives::Communicator& host_comm,
           collectives::cuda::DeviceComm* device_comm, const CudaRankOptions& options);
  ~CudaRank() override;
  CudaRank(const CudaRank&) = delete;
  CudaRank& operator=(const CudaRank&) = delete;

  void forward(std::span<const BatchToken> batch, std::vector<float>& logits,
               TapSink* taps = nullptr) override;
  const ModelConfig& config() const override { return config_; }
  const RankWeights& weights() const override { return weights_; }
  uint64_t kvBytes() const override { return k_cache_.bytes() + v_cache_.bytes(); }
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

  void upload();
  void ensureCapacity(int64_t n_tokens);
  void attentionBlock(Runner& run, int64_t layer, int64_t n, TapSink* taps,
                      std::span<const BatchToken> batch);
  void ffnBlock(Runner& run, int64_t layer, int64_t n, TapSink* taps,
                std::span<const BatchToken> batch);
  void head(Runner& run, int64_t n_out);
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
  DeviceArray<float> k_cache_, v_cache_;

  // Per-step state, sized for the largest batch so far (capacity_ tokens).
  int64_t capacity_ = 0;
  DeviceArray<float> x_, h_, q_, k_, v_, attn_, o_, gate_, up_, hx_, logits_local_;
  DeviceArray<int32_t> meta_;  // [4][capacity]: tokens, positions, slots, logits rows
  PinnedArray<int32_t> meta_host_;
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
