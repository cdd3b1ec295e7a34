// RankModel: one tensor-parallel rank of the decoder, whatever it runs on: LlamaRank (CPU,
// model/llama_rank.h) or CudaRank (one GPU, model/cuda/cuda_rank.h). The node layer
// (node::RankSet) drives ranks only through this interface.
//
// Contract
// - Every rank of the group calls forward() with the same batch, in the same order; the ranks
//   meet in two all-reduces per layer (after attn_output and after ffn_down) and one gather of
//   the logits to global rank 0 (vocab-parallel head).
// - One thread (the rank's) calls forward(); a rank may fan its work out further (a CPU
//   thread pool, a CUDA stream) but returns only when the batch is done.
// - The KV cache has independent sequence slots; a token at position p of slot s attends to
//   positions [0, p] of slot s, which must have been fed before or in the same batch. Paged
//   ranks (LlamaRank) read and write a token's positions through its block table instead when
//   it has one (model/kv_cache.h): positions [0, p] of the sequence whose table it carries.
// - weights() is the host copy of the rank's shard (tensor reads, model/tensor_read.h);
//   immutable after construction.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/taps.h"
#include "model/weights.h"

namespace tpnode::model {

class KvBlockIo;

struct BatchToken {
  int32_t token = 0;
  int32_t pos = 0;
  int32_t slot = 0;
  bool logits = false;  // produce a logits row for this token
  bool tap = false;     // copy its activations into the TapSink (model/taps.h), if one is given
  // The sequence's KV block table, covering positions [0, pos] (model/kv_cache.h); empty: the
  // slot's own blocks. Points into the step's command, which outlives the forward call.
  std::span<const uint32_t> blocks;
};

class RankModel {
 public:
  virtual ~RankModel() = default;

  // Runs the batch. On global rank 0, `logits` receives [tokens with logits=true][n_vocab]
  // (full vocabulary); the other ranks get it empty. Throws Error(kInvalidArgument) for a bad
  // token id or slot, Error(kResource) for a position beyond the context.
  // `taps` (may be null; only one rank needs to pass one): rows of the tokens marked `tap` at
  // the sink's points, copied during the pass.
  virtual void forward(std::span<const BatchToken> batch, std::vector<float>& logits,
                       TapSink* taps = nullptr) = 0;

  // Pipeline stages (model/stage_plan.h; a rank loaded with a StagePart). Every rank of the
  // stage calls them with the same batch, in the same order, as forward().
  // forwardLayers: runs the rank's layers on the batch. `hidden_in`: [batch][n_embd], the
  // previous stage's output, or null on the first stage (the token embeddings then). Leaves
  // the residual stream after the last layer in `hidden_out` ([batch][n_embd], the same on
  // every rank of the stage). `taps` (may be null): as forward(), for the specs of the rank's
  // layers (specs of other layers stay untouched); the rows are appended to what the sink
  // holds, so that a step cut into micro-batches collects its tokens in batch order (the
  // caller sizes `taps->rows` to its specs before the step).
  // forwardHead (first stage): the output norm and head on `rows` [n][n_embd], the final hidden
  // rows of the batch tokens marked `logits`, in batch order; logits as forward() gives them.
  // Error(kUnsupported) from ranks that cannot run a stage (GPU ranks, for now).
  virtual void forwardLayers(std::span<const BatchToken> batch, const float* hidden_in,
                             std::vector<float>& hidden_out, TapSink* taps = nullptr);
  virtual void forwardHead(std::span<const BatchToken> batch, const float* rows,
                           std::vector<float>& logits);

  virtual const ModelConfig& config() const = 0;
  virtual const RankWeights& weights() const = 0;
  virtual uint64_t kvBytes() const = 0;
  // The paged KV cache (model/kv_cache.h KvBlockIo) for a second tier's block export/import,
  // or null for ranks without one. The rank's thread only, between steps.
  virtual KvBlockIo* pagedKvCache() { return nullptr; }
  // Bytes this rank holds on its device (weights, KV cache, scratch); 0 for CPU ranks.
  virtual uint64_t deviceBytes() const { return 0; }
  // "cpu" or "cuda:<device>".
  virtual std::string backend() const = 0;
  // Commits (allocates and touches) the buffers a batch of up to `tokens` tokens works in, so
  // that the first such batch does not fault their pages in mid-step (as the KV cache's pages
  // are committed at construction); larger batches still grow them. Before or between steps,
  // not during one. Default: nothing (ranks that allocate their buffers up front).
  virtual void reserveBatch(int64_t tokens) { (void)tokens; }
  // Mixture of experts: token-expert pairs routed to each expert since construction, summed
  // over layers (the routing is replicated, so every rank counts the same); empty for dense
  // models. Any thread.
  virtual std::vector<uint64_t> expertPairs() const { return {}; }
};

// Checks a batch against the rank's limits (the message names the token, slot or position).
void checkBatch(std::span<const BatchToken> batch, int64_t n_vocab, int64_t n_slots, int64_t n_ctx);
// Checks the batch's block tables against a paged cache of `n_blocks` blocks of `block_size`
// positions where slot s owns blocks [s * slot_blocks, (s + 1) * slot_blocks) for tokens
// without a table: a table covers the token's position, every block of it is in the cache
// (Error(kInvalidArgument) naming the position or block otherwise).
void checkKvTables(std::span<const BatchToken> batch, int64_t block_size, int64_t n_blocks,
                   int64_t slot_blocks);

}  // namespace tpnode::model
