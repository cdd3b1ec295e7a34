// LlamaRank: one tensor-parallel rank of a Llama-family decoder (llama, qwen2, qwen3) on CPU.
//
// Contract
// - Every rank of the group calls forward() with the same batch, in the same order; the ranks
//   meet in two all-reduces per layer (after attn_output and after ffn_down) and one
//   gather of the logits to global rank 0 (vocab-parallel head) through their Communicator.
// - One thread (the rank's) calls forward(); compute fans out to the rank's ThreadPool.
// - The KV cache is paged (model/kv_cache.h): a token at position p attends to positions [0, p]
//   of its sequence through its block table (or its slot's own blocks without one), which
//   must have been fed before or in the same batch.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "collectives/communicator.h"
#include "model/config.h"
#include "model/kernels/cpu/aligned_vector.h"
#include "model/kernels/cpu/ggml_math.h"
#include "model/kernels/cpu/matmul.h"
#include "model/kernels/cpu/thread_pool.h"
#include "model/kv_cache.h"
#include "model/moe_ffn.h"
#include "model/rank_model.h"
#include "model/taps.h"
#include "model/weights.h"

namespace tpnode::model {

class LlamaRank final : public RankModel {
 public:
  // comm, pool: must outlive this object (owned by the rank's driver). KV cache: `kv_blocks`
  // blocks of `kv_block_size` positions (0: n_slots full contexts), model/kv_cache.h.
  LlamaRank(const ModelConfig& config, RankWeights weights, collectives::Communicator& comm,
            kernels::ThreadPool& pool, int64_t n_slots, int64_t n_ctx,
            int64_t kv_block_size = kDefaultKvBlockSize, int64_t kv_blocks = 0);

  // Runs the batch. On global rank 0, `logits` receives [tokens with logits=true][n_vocab]
  // (full vocabulary; a vocab-parallel head gathers the slices to rank 0); the other ranks get
  // it empty. Throws Error(kInvalidArgument) for a bad token id, slot or position.
  // `taps` (may be null; only one rank needs to pass one): rows of the tokens marked `tap` at
  // the sink's points, copied during the pass (no collective, the values are replicated).
  void forward(std::span<const BatchToken> batch, std::vector<float>& logits,
               TapSink* taps = nullptr) override;

  // Pipeline stages (RankModel; model/llama_rank_stage.cc).
  void forwardLayers(std::span<const BatchToken> batch, const float* hidden_in,
                     std::vector<float>& hidden_out, TapSink* taps = nullptr) override;
  void forwardHead(std::span<const BatchToken> batch, const float* rows,
                   std::vector<float>& logits) override;

  const ModelConfig& config() const override { return config_; }
  const RankWeights& weights() const override { return weights_; }
  uint64_t kvBytes() const override { return kv_.bytes(); }
  // The KV cache itself (block export/import for a second tier); the rank's thread only.
  KvCache* pagedKvCache() override { return &kv_; }
  std::string backend() const override { return "cpu"; }
  // The dense layers' per-batch rows (residual, norm, Q / K / V, attention, FFN), attention's
  // shared K / V copy of one sequence's cells, RoPE's angles and the matmuls' converted
  // activations; a mixture of experts' routed rows still grow with the batch.
  void reserveBatch(int64_t tokens) override;
  std::vector<uint64_t> expertPairs() const override {
    return moe_ ? moe_->expertPairs() : std::vector<uint64_t>{};
  }
  // Prefill attention copies the K and V cells each sequence's query blocks read once per layer
  // and kv head while they take at most `bytes` in all (default kSharedRowsBudget: very long
  // contexts with many kv heads go past it); past it each block gathers its own. The same bits
  // either way (tests compare the two with 0).
  static constexpr size_t kSharedRowsBudget = size_t{64} << 20;
  void setSharedRowsBudget(size_t bytes) { shared_rows_budget_ = bytes; }

 private:
  // Token embeddings (gemma3: scaled) of the batch into x_.
  void embed(std::span<const BatchToken> batch);
  // read_rows_only: the queries, attention and output projection run on read_rows_ only
  // (read_batch_: their tokens), K and V on every row; x_ and o_ then hold those rows alone.
  void attentionBlock(int64_t layer, std::span<const BatchToken> batch,
                      bool read_rows_only = false);
  // forward()'s last attention block: the rows whose output is read (tokens with logits or taps;
  // as llama.cpp's inp_out_ids, which it applies after the block) become read_rows_ /
  // read_batch_, and the returned batch (`batch` itself where every row is read). K and V are
  // projected and cached for every row (later tokens attend to them); the queries, attention and
  // output projection run on the read rows only, in the V-sum order of the whole batch, so their
  // values are the full block's. x_ and o_ then hold the read rows alone.
  std::span<const BatchToken> lastAttentionBlock(int64_t layer, std::span<const BatchToken> batch);
  // After the Q/K/V projections, per token: biases, per-head norms, RoPE, the K and V rows
  // written to the cache. q_ holds a row per batch row, or (read_rows_only) per read_rows_ row.
  void prepareQkv(int64_t layer, std::span<const BatchToken> batch, bool read_rows_only);
  // rows[j] = rows[read_rows_[j]] for each read row j (dim values each); then only those kept.
  void compactRows(std::vector<float>& rows);
  // All-reduces o_, which holds the read rows: over all n rows of the batch (the other rows zero),
  // so ranks that run the block on every row (GPU ranks) take part in the same collective; o_
  // then holds the read rows' sums.
  void allReduceReadRows(int64_t n);
  // rows x n values: y = rmsNorm(x) * w, the rows split over the pool (y may be x).
  void normRows(const float* x, const std::vector<float>& w, float* y, int64_t n, int64_t rows);
  // The end of a block: o_ = post_norm(o_) (when post_norm is not empty), then x_ += o_.
  void residual(const std::vector<float>& post_norm, int64_t n_tokens);
  void ffnBlock(int64_t layer, int64_t n_tokens);
  // forward()'s last feed-forward block, after lastAttentionBlock: on the read rows x_ holds
  // (the batch's n rows where every row is read).
  void lastFfnBlock(int64_t layer, int64_t n);
  void ffnRows(const LayerWeights& w, int64_t n_tokens);   // norm, FFN: into o_
  void denseFfn(const LayerWeights& w, int64_t n_tokens);  // into o_
  // Attention of the batch's queries (q_'s rows) over the cache, into attn_; V summed in `order`
  // (llama.cpp's for one token differs from its order for a batch).
  void attend(int64_t layer, std::span<const BatchToken> batch, kernels::ggml::VSumOrder order);
  // attend's unit of work: batch tokens [begin, end) of one sequence at consecutive positions
  // (at most kQueryBlock), which read cells [lo, hi] together.
  static constexpr int64_t kQueryBlock = 16;
  // attend() cuts kv heads' groups of query heads into parts until each thread has this many
  // jobs (or each part is one head).
  static constexpr int64_t kJobsPerThread = 4;
  struct QueryBlock {
    int64_t begin, end, lo, hi;
  };
  static std::vector<QueryBlock> queryBlocks(std::span<const BatchToken> batch, int64_t window);
  // Consecutive query blocks of one sequence (queryBlocks' list up to block `last`) whose
  // blocks of several queries read the cells [lo, hi] from one copy per kv head, gathered once
  // per layer (attend's shared_k_ / shared_v_ from `at` on, kv head h at at + h x span x hd;
  // only where `copied`: the run has such a block).
  struct QueryRun {
    size_t last;
    int64_t lo, hi;
    bool copied;
    size_t at;
  };
  // The first cell position t attends to (a sliding window of `window` positions; 0: none).
  static int64_t firstCell(const BatchToken& t, int64_t window);
  // The KV block holding position `pos` of token t's sequence.
  int64_t kvBlock(const BatchToken& t, int64_t pos) const {
    const int64_t i = pos / kv_.blockSize();
    return t.blocks.empty() ? t.slot * kv_.slotBlocks() + i
                            : static_cast<int64_t>(t.blocks[static_cast<size_t>(i)]);
  }
  void checkKvTables(std::span<const BatchToken> batch) const;
  void head(std::span<const BatchToken> batch, std::vector<float>& logits);
  void softcap(std::vector<float>& logits);
  // same_x: x is the previous matmul's input, unchanged (its converted activations are reused).
  void matmul(const Matrix& w, const float* x, int64_t n, float* y, bool same_x = false);
  // RoPE's cos / sin for layer l at each batch token's position (n_rot values per token), from
  // rope_angles_ where the layer's setting and the positions match, else computed into it.
  const float* ropeAnglesFor(int64_t l, std::span<const BatchToken> batch);
  void allReduce(float* data, size_t count);
  void tap(TapSink* sink, int64_t layer, TapPoint point, const std::vector<float>& rows,
           std::span<const BatchToken> batch) const;

  ModelConfig config_;
  RankWeights weights_;
  collectives::Communicator& comm_;
  kernels::ThreadPool& pool_;
  KvCache kv_;
  Matrix head_slice_;            // tied + vocab-parallel head: this rank's rows of token_embd
  std::unique_ptr<MoeFfn> moe_;  // mixture-of-experts FFN (null for a dense model)
  // Scratch, sized for the largest batch so far: [tokens][width].
  std::vector<float> x_, h_, k_, v_, o_, gate_, up_, logits_local_, gathered_;
  kernels::AlignedVector<float> q_, attn_;  // attention's rows: 64-byte aligned vector loads
  // attend's gathered cells of each QueryRun: K rows compact, V transposed (value d of cell c at
  // [d x span + c]).
  kernels::AlignedVector<float> shared_k_, shared_v_;
  size_t shared_rows_budget_ = kSharedRowsBudget;
  std::vector<int64_t> out_rows_;       // head(): the batch rows that get logits
  std::vector<int64_t> read_rows_;      // lastAttentionBlock(): the batch rows whose output is read
  std::vector<BatchToken> read_batch_;  // ... and their tokens (block tables: this forward's)
  // The rotations of one batch for one RoPE setting (base, frequency scale), shared by every
  // layer with that setting: computed once per batch and setting, not once per layer (gemma3's
  // local and global layers have one setting each, so two entries).
  struct RopeAngles {
    float base = 0.f, scale = 0.f;
    std::vector<int64_t> positions;
    std::vector<float> cs;  // [token][n_rot]
  };
  std::array<RopeAngles, 2> rope_angles_;
  size_t rope_next_ = 0;  // the entry the next miss overwrites
  kernels::MatmulScratch quant_scratch_;
};

}  // namespace tpnode::model
