// ShardPlan: how each tensor of a model is cut across `tp` ranks. Pure functions of the
// model's hyperparameters and tensor list; no I/O, table-tested (tests/model/shard_plan_test).
//
// Rules (Megatron-style, as vLLM and distributed-llama do it):
// - split rows (column-parallel, output features): attn_q/k/v (and their biases), ffn_gate,
//   ffn_up, and the output head when the vocabulary divides by tp (vocab-parallel logits,
//   all-gathered); a rank owns whole heads.
// - split columns (row-parallel, input features): attn_output, ffn_down; their partial outputs
//   are all-reduced. A quantized row may only be cut at block boundaries.
// - replicate: norms, token embeddings, anything else.
// - mixture of experts (ModelConfig::isMoe), placement "expert slicing": the stacked expert
//   tensors [n_expert][rows][cols] are cut per expert as the dense FFN is: ffn_gate_exps /
//   ffn_up_exps by rows, ffn_down_exps by columns, so every rank holds 1/tp of every expert; the
//   router (ffn_gate_inp) and qwen2moe's shared-expert gate (ffn_gate_inp_shexp) are replicated;
//   the shared expert (ffn_*_shexp) is split as the dense FFN.
// - mixture of experts, placement "expert parallel": rank r holds whole experts
//   [r * n_expert / tp, (r + 1) * n_expert / tp) of every layer (a balanced map: the counts
//   differ by at most one), router and shared expert as above; refused when tp > n_expert.
//   MoePlacement below says which placement a plan uses and when each is chosen.
// - n_kv_heads < tp: K/V heads are replicated: tensor cut into n_kv pieces, rank r holds piece
//   r * n_kv / tp, so each rank still owns whole query groups (tp must be a multiple of n_kv).
// A shape that cannot be split is refused with Error(kInvalidArgument) naming the tensor, the
// size and the tp degrees that would work.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/tensor_type.h"

namespace tpnode::model {

enum class ShardKind { kReplicate, kSplitRows, kSplitCols, kSplitExperts };

struct TensorDesc {
  std::string name;
  TensorType type = TensorType::kF32;
  uint64_t cols = 0;  // ggml ne[0]: elements per row
  uint64_t rows = 1;  // product of ne[1..3]
  // Stacked expert tensors (ffn_*_exps): ne[2], the number of experts; `rows` counts the rows of
  // all of them (rows / experts per expert). 1 for every other tensor.
  uint64_t experts = 1;
};

// A tensor's rows and columns held by one rank. For a stacked expert tensor the row range is
// within each expert, and the rank holds experts [expert_begin, expert_end) of it.
struct Slice {
  uint64_t row_begin, row_end, col_begin, col_end;
  uint64_t expert_begin = 0, expert_end = 1;
};

struct TensorShard {
  TensorDesc tensor;
  ShardKind kind = ShardKind::kReplicate;
  int pieces = 1;  // the split dimension is cut into this many equal pieces
  Slice sliceFor(int rank, int tp) const;
  uint64_t bytesFor(int rank, int tp) const;
};

// How the output head (output.weight, or token_embd when tied) is laid out over the ranks:
// - kVocabParallel: rows split by vocabulary; every rank computes its slice of the logits and
//   they are all-gathered (no rank holds the whole head). Refused when the vocabulary does not
//   divide by tp.
// - kReplicated: global rank 0 alone computes every logit from the whole head; the other ranks
//   skip the head and do not load an untied output.weight (a tied head is token_embd, which every
//   rank holds for the embedding anyway).
// - kAuto: vocab-parallel when the vocabulary divides by tp, else replicated (see docs/models.md
//   "Output head" for the measurement behind this default).
enum class HeadLayout { kAuto, kVocabParallel, kReplicated };

// "auto", "vocab-parallel", "replicated"; Error(kInvalidArgument) naming --head otherwise.
HeadLayout parseHeadLayout(const std::string& text);

// Where a mixture-of-experts model's experts go (--moe-placement):
// - kSlice: expert slicing: every rank holds 1/tp of every expert, so every rank works on every
//   selected expert (the work of a step is split evenly whatever the routing). Refused when a
//   slice would cut a quantization block (or the expert width does not divide by tp).
// - kExpert: expert parallel: every rank holds whole experts and computes only the selected
//   experts it owns (whole-expert matmuls; the work of a step follows the routing). Refused when
//   there are more ranks than experts.
// - kAuto: slicing where it works, else expert parallel; the plan says which and why.
// Both end in the one all-reduce per FFN the dense model has. Ignored for dense models.
enum class MoePlacement { kAuto, kSlice, kExpert };

// "auto", "slice", "expert"; Error(kInvalidArgument) naming --moe-placement otherwise.
MoePlacement parseMoePlacement(const std::string& text);

struct ShardPlan {
  int tp = 1;
  MoePlacement moe = MoePlacement::kSlice;                 // the placement used (kSlice or kExpert)
  std::string moe_reason;                                  // why (empty for a dense model)
  bool vocab_parallel_head = false;                        // output rows split, logits all-gathered
  std::vector<TensorShard> shards;                         // same order as the input tensors
  const TensorShard& find(const std::string& name) const;  // TP_CHECK when absent
  uint64_t rankBytes(int rank) const;
  uint64_t totalBytes() const;   // the model's bytes (unsharded)
  std::string describe() const;  // a table, one line per tensor kind, and per-rank bytes
};

std::vector<TensorDesc> tensorDescs(const GgufMetadata& meta);

// Throws Error(kInvalidArgument) when the model cannot be split over tp, when `head` is
// kVocabParallel and the vocabulary does not divide by tp, or when `moe` forces a placement
// that cannot work (the message names the one that does, if any).
ShardPlan planShards(const ModelConfig& config, const std::vector<TensorDesc>& tensors, int tp,
                     HeadLayout head = HeadLayout::kAuto, MoePlacement moe = MoePlacement::kAuto);

// The tp degrees in [1, max_tp] that planShards accepts with placement `moe`.
std::vector<int> workingTpDegrees(const ModelConfig& config, const std::vector<TensorDesc>& tensors,
                                  int max_tp = 64, MoePlacement moe = MoePlacement::kAuto);

}  // namespace tpnode::model
