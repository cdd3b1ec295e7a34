// RankWeights: the tensors one rank computes with, copied out of the GGUF mapping into
// ordinary anonymous memory (the mapping is not used after loading). Each rank copies only its
// own slice (ShardPlan); replicated tensors are copied per rank.
//
// Threading: loadRankWeights may run concurrently for different ranks on one GgufFile.
// A loaded RankWeights is immutable.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/gguf.h"
#include "model/host_buffer.h"
#include "model/shard_plan.h"
#include "model/stage_plan.h"

namespace tpnode::model {

// A 2-D weight slice: `rows` rows of `cols` elements of `type`, rows contiguous.
struct Matrix {
  TensorType type = TensorType::kF32;
  int64_t rows = 0, cols = 0;
  size_t row_bytes = 0;
  // 4: groups of 4 rows stored block-interleaved (kernels::interleaveRows4); 16: Q4_K
  // repacked 16 rows per group (kernels/cpu/q4k_x16.h), row_bytes is then the repacked size.
  int interleave = 1;
  // Q8_0 in the 4-row layout with no weight byte -128 (llama.cpp's quantizer writes -127..127;
  // kernels::packWeights checks): the decode may take DotKernels::x4_q8_0_no_min.
  bool q8_no_min = false;
  // Q6_K in the 16-row layout's linear arrangement (kernels/cpu/q6k_x16.h BlockQ6Kx16Linear), as
  // kernels::packWeights writes it for a table whose 256-bit kernels read it; else the split one.
  bool q6k_linear = false;
  HostBuffer data;  // anonymous memory, huge pages when large
  bool empty() const { return rows == 0; }
  // Row r (interleave 1) or the start of the group holding row r (r % interleave == 0).
  const uint8_t* row(int64_t r) const { return data.data() + static_cast<size_t>(r) * row_bytes; }
};

// A mixture-of-experts FFN layer (empty for a dense one): the router and this rank's part of
// the experts it holds (ShardPlan: expert slicing holds 1/tp of every expert).
struct MoeLayerWeights {
  Matrix router;                       // ffn_gate_inp [n_expert, dim], replicated
  int64_t expert_begin = 0;            // experts [expert_begin, expert_begin + gate.size())
  std::vector<Matrix> gate, up, down;  // per expert: gate/up [local rows, dim], down [dim, local]
  Matrix shexp_gate, shexp_up, shexp_down;  // qwen2moe's shared expert, split as the dense FFN
  std::vector<float> shexp_gate_inp;        // qwen2moe [dim], replicated
  bool empty() const { return router.empty(); }
};

struct LayerWeights {
  std::vector<float> attn_norm, ffn_norm;
  std::vector<float> q_norm, k_norm;                 // qwen3, gemma3: [head_dim]
  std::vector<float> attn_post_norm, ffn_post_norm;  // gemma3: [dim]
  std::vector<float> bq, bk, bv;                     // qwen2: this rank's slice
  Matrix wq, wk, wv, wo;        // wq/wk/wv: [local heads * head_dim, dim]; wo: [dim, local q dim]
  Matrix w_gate, w_up, w_down;  // gate/up: [local ffn, dim]; down: [dim, local ffn]
  MoeLayerWeights moe;          // mixture of experts: w_gate / w_up / w_down are then empty
};

struct RankWeights {
  int rank = 0, tp = 1;
  int64_t n_head = 0, n_head_kv = 0;       // local heads
  int64_t n_ff = 0;                        // local ffn rows
  int64_t vocab_begin = 0, vocab_end = 0;  // rows of the head this rank computes
  Matrix token_embd;                       // replicated [vocab, dim]
  Matrix output;                           // [vocab_end - vocab_begin, dim] (empty when tied)
  std::vector<float> output_norm;
  std::vector<float> rope_freqs;     // optional llama3 frequency factors
  std::vector<LayerWeights> layers;  // n_layer entries; empty outside [layer_begin, layer_end)
  int64_t layer_begin = 0, layer_end = 0;  // the layers this rank holds (its pipeline stage's)
  bool embeddings = true;                  // token_embd, output_norm and the head loaded (stage 0)
  uint64_t bytes = 0;
  const Matrix& head() const { return output.empty() ? token_embd : output; }
  // A tied head split by vocabulary reads only rows [vocab_begin, vocab_end) of the replicated
  // token_embd: true when this rank needs that slice as a matrix of its own (tiedHeadSlice).
  bool needsTiedHeadSlice() const {
    return output.empty() && vocab_end - vocab_begin != token_embd.rows;
  }
};

// Rows [vocab_begin, vocab_end) of w.token_embd, copied into a plain matrix of their own (the
// rank's part of a tied, vocab-parallel head). Requires needsTiedHeadSlice().
Matrix tiedHeadSlice(const RankWeights& w);

// Throws Error(kInvalidData) naming a tensor whose shape or type does not fit the config.
// pack: rewrite the projections into the CPU kernels' layout (kernels::packWeights); false keeps
// every matrix in the file's plain row layout (interleave 1), as GPU ranks upload it.
// part (may be null: the whole model): a pipeline stage's layers, and whether it holds the
// embeddings and the head (model/stage_plan.h); nothing else is read.
RankWeights loadRankWeights(const GgufFile& file, const ModelConfig& config, const ShardPlan& plan,
                            int rank, bool pack = true, const StagePart* part = nullptr);

}  // namespace tpnode::model
