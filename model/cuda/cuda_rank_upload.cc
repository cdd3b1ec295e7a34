// CudaRank construction: the rank's stream, its weights on the device, the KV cache.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "model/cuda/cuda_rank.h"
#include "model/tensor_type.h"

namespace tpnode::model::cuda {
namespace {

void checkPlain(const Matrix& m, const char* what) {
  if (m.interleave != 1) {
    fail(ErrorCode::kInternal,
         "{} was loaded in a CPU kernel layout (interleave {}); GPU ranks "
         "need loadRankWeights(..., pack=false)",
         what, m.interleave);
  }
  if (!supportsType(m.type)) {
    fail(ErrorCode::kUnsupported,
         "{} is {}, which the CUDA kernels do not run (they run F32, F16, BF16, Q8_0, Q4_0, "
         "Q5_0, Q5_1, Q4_K, Q6_K); use --backend cpu or a model quantised to one of those",
         what, tensorTypeName(m.type));
  }
}

}  // namespace

CudaRank::CudaRank(const ModelConfig& config, RankWeights weights,
                   collectives::Communicator& host_comm, collectives::cuda::DeviceComm* device_comm,
                   const CudaRankOptions& options)
    : config_(config),
      weights_(std::move(weights)),
      host_comm_(host_comm),
      device_comm_(device_comm),
      options_(options) {
  if (device_comm_ == nullptr && host_comm_.size() > 1) {
    fail(ErrorCode::kInternal, "a GPU rank of a group of {} needs a device communicator",
         host_comm_.size());
  }
  TP_CUDA(cudaSetDevice(options_.device));
  TP_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  try {
    upload();
  } catch (...) {
    for (DeviceMatrix& m : matrices_) freeMatrix(m);
    (void)cudaStreamDestroy(stream_);
    throw;
  }
}

uint64_t CudaRank::deviceBytes() const {
  uint64_t b = 0;
  for (const DeviceMatrix& m : matrices_) b += m.bytes;
  for (const DeviceLayer& l : layers_) {
    for (const DeviceArray<float>* a : {&l.attn_norm, &l.ffn_norm, &l.q_norm, &l.k_norm,
                                        &l.attn_post_norm, &l.ffn_post_norm, &l.bq, &l.bk, &l.bv}) {
      b += a->bytes();
    }
  }
  b += output_norm_.bytes() + rope_freqs_.bytes() + k_cache_.bytes() + v_cache_.bytes();
  for (const DeviceArray<float>* a :
       {&x_, &h_, &q_, &k_, &v_, &attn_, &o_, &gate_, &up_, &hx_, &logits_local_}) {
    b += a->bytes();
  }
  return b + meta_.bytes() + tables_.bytes() + workspace_.bytes();
}

void CudaRank::upload() {
  auto put = [&](const Matrix& m, const std::string& what) {
    checkPlain(m, what.c_str());
    matrices_.push_back(uploadMatrix(m));
    return matrices_.back();
  };
  if (weights_.embeddings) {  // the first stage (or the whole model)
    token_embd_ = put(weights_.token_embd, "token_embd.weight");
    if (!weights_.output.empty()) {
      head_ = put(weights_.output, "output.weight");
    } else if (weights_.needsTiedHeadSlice()) {
      head_ = put(tiedHeadSlice(weights_), "token_embd.weight (head slice)");
    } else {
      head_ = token_embd_;  // tied and replicated: the same device matrix
    }
  }
  output_norm_ = toDevice<float>(weights_.output_norm);
  rope_freqs_ = toDevice<float>(weights_.rope_freqs);
  layers_.resize(weights_.layers.size());
  // layers_ is indexed by layer, as weights_.layers; a stage uploads only its own.
  for (size_t l = static_cast<size_t>(weights_.layer_begin);
       l < static_cast<size_t>(weights_.layer_end); ++l) {
    const LayerWeights& hw = weights_.layers[l];
    DeviceLayer& d = layers_[l];
    const std::string p = "blk." + std::to_string(l) + ".";
    d.wq = put(hw.wq, p + "attn_q.weight");
    d.wk = put(hw.wk, p + "attn_k.weight");
    d.wv = put(hw.wv, p + "attn_v.weight");
    d.wo = put(hw.wo, p + "attn_output.weight");
    d.w_gate = put(hw.w_gate, p + "ffn_gate.weight");
    d.w_up = put(hw.w_up, p + "ffn_up.weight");
    d.w_down = put(hw.w_down, p + "ffn_down.weight");
    d.attn_norm = toDevice<float>(hw.attn_norm);
    d.ffn_norm = toDevice<float>(hw.ffn_norm);
    d.q_norm = toDevice<float>(hw.q_norm);
    d.k_norm = toDevice<float>(hw.k_norm);
    d.attn_post_norm = toDevice<float>(hw.attn_post_norm);
    d.ffn_post_norm = toDevice<float>(hw.ffn_post_norm);
    d.bq = toDevice<float>(hw.bq);
    d.bk = toDevice<float>(hw.bk);
    d.bv = toDevice<float>(hw.bv);
  }
  // The KV cache holds the rank's layers only (cache layer = layer - layer_begin), in blocks.
  const int64_t kv_layers = weights_.layer_end - weights_.layer_begin;
  options_.kv_block_size = std::max<int64_t>(1, options_.kv_block_size);
  if (options_.kv_blocks <= 0) options_.kv_blocks = options_.n_slots * slotBlocks();
  const size_t kv = static_cast<size_t>(kv_layers * options_.kv_blocks * options_.kv_block_size *
                                        weights_.n_head_kv * config_.head_dim);
  // Room for every slot's full table; uploadBatch() grows it if a step needs more.
  tables_.resize(static_cast<size_t>(options_.n_slots * slotBlocks()));
  tables_host_.resize(tables_.size());
  k_cache_.resize(kv);
  v_cache_.resize(kv);
  TP_CUDA(cudaMemsetAsync(k_cache_.get(), 0, k_cache_.bytes(), stream_));
  TP_CUDA(cudaMemsetAsync(v_cache_.get(), 0, v_cache_.bytes(), stream_));
  int64_t max_cols = 0;
  for (const DeviceMatrix& m : matrices_) max_cols = std::max(max_cols, m.cols);
  workspace_.resize(matmulWorkspaceBytes(max_cols));
  TP_CUDA(cudaStreamSynchronize(stream_));
}

KvView CudaRank::kvView() const {
  return cuda::kvView(k_cache_.get(), v_cache_.get(), options_.kv_blocks, options_.kv_block_size,
                      weights_.n_head_kv * config_.head_dim, tables_.get());
}

size_t CudaRank::blockFloats() const {
  return static_cast<size_t>((weights_.layer_end - weights_.layer_begin) * 2 *
                             options_.kv_block_size * weights_.n_head_kv * config_.head_dim);
}

// One block's shard as the CPU ranks' KvCache lays it out: for each of the rank's layers, the
// block's K rows, then its V rows.
void CudaRank::exportBlock(int64_t block, std::span<float> out) const {
  checkKvBlockShard(block, options_.kv_blocks, out.size(), blockFloats());
  TP_CUDA(cudaSetDevice(options_.device));
  const size_t run =
      static_cast<size_t>(options_.kv_block_size * weights_.n_head_kv * config_.head_dim);
  float* dst = out.data();
  for (int64_t l = 0; l < weights_.layer_end - weights_.layer_begin; ++l) {
    const size_t at = static_cast<size_t>(l * options_.kv_blocks + block) * run;
    TP_CUDA(cudaMemcpyAsync(dst, k_cache_.get() + at, run * sizeof(float), cudaMemcpyDeviceToHost,
                            stream_));
    TP_CUDA(cudaMemcpyAsync(dst + run, v_cache_.get() + at, run * sizeof(float),
                            cudaMemcpyDeviceToHost, stream_));
    dst += 2 * run;
  }
  TP_CUDA(cudaStreamSynchronize(stream_));
}

void CudaRank::importBlock(int64_t block, std::span<const float> in) {
  checkKvBlockShard(block, options_.kv_blocks, in.size(), blockFloats());
  TP_CUDA(cudaSetDevice(options_.device));
  const size_t run =
      static_cast<size_t>(options_.kv_block_size * weights_.n_head_kv * config_.head_dim);
  const float* src = in.data();
  for (int64_t l = 0; l < weights_.layer_end - weights_.layer_begin; ++l) {
    const size_t at = static_cast<size_t>(l * options_.kv_blocks + block) * run;
    TP_CUDA(cudaMemcpyAsync(k_cache_.get() + at, src, run * sizeof(float), cudaMemcpyHostToDevice,
                            stream_));
    TP_CUDA(cudaMemcpyAsync(v_cache_.get() + at, src + run, run * sizeof(float),
                            cudaMemcpyHostToDevice, stream_));
    src += 2 * run;
  }
  TP_CUDA(cudaStreamSynchronize(stream_));
}

}  // namespace tpnode::model::cuda
