// RankSet: this node's local tensor-parallel ranks, one persistent thread each, each with its
// weight shard, KV cache, compute pool and hierarchical communicator. The driver and the
// workers hand it one batch per step; every local rank runs it, meeting the ranks of the other
// nodes in the all-reduces.
//
// Contract
// - Ownership: the RankSet owns its rank threads, models and communicators; the NodeGroup
//   (and through it the mesh) must outlive it.
// - Threads: run() is called from one thread (the step loop) and blocks until every local rank
//   has finished the batch. The first Error of any rank is rethrown there; the NodeGroup is
//   aborted so that no rank, here or on another node, waits forever. After an Error the
//   RankSet is dead: every later run() throws (the cluster is re-formed from scratch).
// - Logits: rows for the batch tokens marked `logits`, in batch order, full vocabulary
//   (global rank 0's copy; every rank holds the same after the vocab-parallel all-gather).
// - Taps: run(..., taps) and runLayers(..., taps) hand the sink to local rank 0 only
//   (model/taps.h).
// - Pipeline stages (options.stage set): the ranks hold that stage's layers (and the
//   embeddings and head on stage 0); runLayers() and runHead() replace run(), with the same
//   threading; every rank gets the same input, local rank 0's output is returned.
// - Tensor reads: gatherTensor() of a split tensor is a collective like a step: every rank of
//   every node must call it for the same tensor between the same steps. Each local rank turns
//   its slice into GGUF bytes and gathers them to global rank 0 (Communicator::gather, in
//   chunks of read_chunk_bytes), which assembles the full tensor (tp=1 order,
//   model/tensor_read.h). Memory: global rank 0 holds the gathered slices and the tensor; every
//   rank its slice and a chunk buffer. A replicated tensor passes through: local rank 0's
//   copy, no collective (the caller reads it between steps, on its own thread; the weights are
//   immutable).
// - The Redis KV tier (options.kv_tier; node/kv_tier_rank.h): runKvTier() is a
//   collective like a step: every rank of the group (every node; a pipeline stage's nodes)
//   calls it with the same blocks between the same steps. Each rank stores, then loads, its
//   shard under its global rank (options.stage_first_rank + its rank in the group); then the
//   group's ranks all-reduce the loads' results, so each of its nodes gets the same answer: a
//   block counts as loaded only if every rank of the group imported it (StagePipeline combines
//   the stages' answers). A node without the tier (or ranks without a paged cache) takes part
//   and answers "not loaded".
#pragma once

#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "collectives/hierarchical.h"
#include "model/config.h"
#include "model/cuda/gpu_node.h"
#include "model/gguf.h"
#include "model/llama_rank.h"
#include "model/shard_plan.h"
#include "model/stage_plan.h"
#include "node/kv_tier_rank.h"

namespace tpnode::node {

struct RankSetOptions {
  int threads = 1;               // compute threads per rank
  int slots = 1;                 // KV slots (sequences) per rank
  int ctx = 2048;                // positions per slot
  int kv_block_size = 16;        // positions per KV block (model/kv_cache.h)
  int kv_blocks = 0;             // KV blocks per rank (0: slots x ctx positions)
  std::vector<int> cpu_of_rank;  // pin local rank r's thread to this CPU (empty: no pinning)
  // GPU ranks (model/cuda/gpu_node.h) when not empty: CUDA device of each local rank.
  std::vector<int> gpu_of_rank;
  std::string local_transport = "auto";  // GPU ranks' all-reduce (--local-transport)
  std::string inter_transport = "auto";  // GPU ranks across nodes (--inter-transport)
  bool cuda_graphs = true;
  // GPU ranks all-reduce at most this many rows of n_embd floats at a time (longer prompts go
  // in pieces); tests lower it.
  size_t allreduce_piece_rows = 256;
  // gatherTensor all-gathers at most this many bytes of each rank's slice at a time, so that
  // no message exceeds the mesh's frame limit (1 GiB) for any local tp. Must be the same on
  // every node (it fixes the number of collectives per read); tests lower it.
  size_t read_chunk_bytes = size_t{64} << 20;
  // Each rank commits the buffers a batch of this many tokens works in at load
  // (model::RankModel::reserveBatch): the driver's largest step, so that no step faults them
  // in. 0: none (they grow with the batches).
  int reserve_tokens = 0;
  // A pipeline stage's part of the model (CPU or GPU ranks); unset: the whole model.
  std::optional<model::StagePart> stage;
  // A pipeline stage: the cluster's global rank of the stage's first rank (the group numbers
  // the stage's ranks from 0); names the KV tier's keys and counters. 0 without stages.
  int stage_first_rank = 0;
  // The Redis KV tier (--kv-cache-redis-url); unset: none.
  std::optional<KvTierOptions> kv_tier;
};

class RankSet {
 public:
  // Loads the shards of this node's global ranks (group->topology().globalRank(r), r < local
  // tp) in parallel, with progress logs.
  RankSet(const model::GgufFile& file, const model::ModelConfig& config,
          const model::ShardPlan& plan, std::shared_ptr<collectives::NodeGroup> group,
          const RankSetOptions& options);
  ~RankSet();
  RankSet(const RankSet&) = delete;
  RankSet& operator=(const RankSet&) = delete;

  void run(std::span<const model::BatchToken> batch, std::vector<float>& logits,
           model::TapSink* taps = nullptr);

  // Pipeline stages (see the contract; model::RankModel::forwardLayers / forwardHead).
  // `taps`: as run(), for the specs of this stage's layers (appended, see forwardLayers).
  void runLayers(std::span<const model::BatchToken> batch, const float* hidden_in,
                 std::vector<float>& hidden_out, model::TapSink* taps = nullptr);
  void runHead(std::span<const model::BatchToken> batch, const float* rows,
               std::vector<float>& logits);

  // Collective (see the contract). Returns the full tensor's GGUF bytes when `assemble` on
  // node 0 (global rank 0 is its local rank 0), else nothing (a worker only contributes).
  std::vector<uint8_t> gatherTensor(const model::TensorShard& shard, bool assemble = true);
  // Why gatherTensor(shard) would fail on this node ("" when it can be read). Not collective;
  // call it before asking the other nodes to take part.
  std::string readRefusal(const model::TensorShard& shard) const;

  // The Redis KV tier (see the contract): for each of `loads`, whether every rank of the group
  // imported it.
  std::vector<bool> runKvTier(std::span<const KvTierBlock> stores,
                              std::span<const KvTierBlock> loads);

  int localRanks() const { return static_cast<int>(ranks_.size()); }
  uint64_t rankWeightBytes(int local_rank) const;
  uint64_t rankKvBytes(int local_rank) const;
  uint64_t rankDeviceBytes(int local_rank) const;  // 0 for CPU ranks
  std::string rankBackend(int local_rank) const;   // "cpu" or "cuda:<device>"
  std::string gpuTransport() const;                // "" for CPU ranks
  // Mixture of experts: for every global rank, the token-expert pairs routed to the experts it
  // holds (whole or in part), summed over layers since the ranks were loaded; empty for dense
  // models. Counted by local rank 0 (every rank sees the same routing). Not during a step.
  std::vector<uint64_t> expertLoadByRank() const;

 private:
  struct Rank;
  enum class Job { kForward, kLayers, kHead, kRead, kTier };
  std::unique_ptr<model::GpuNode> gpu_;  // GPU ranks only; outlives ranks_ (declared first)
  void rankLoop(Rank& rank);
  void rankRead(Rank& rank, const model::TensorShard& shard, std::vector<uint8_t>* out);
  void rankTier(Rank& rank, std::vector<float>* out);
  // One step of `job` on every rank: `in` (hidden rows or null), `out` (logits or hidden rows).
  void submit(Job job, std::span<const model::BatchToken> batch, const float* in,
              std::vector<float>& out, model::TapSink* taps);
  void dispatchLocked(std::unique_lock<std::mutex>& lock);
  void runJob(Rank& rank, Job job, std::span<const model::BatchToken> batch, const float* hidden_in,
              std::vector<float>* out, model::TapSink* taps);

  std::vector<int> cpu_of_rank_;
  std::vector<std::pair<uint64_t, uint64_t>> experts_of_rank_;  // [global rank]: [begin, end)
  const size_t read_chunk_;                                     // even, >= 2
  std::shared_ptr<collectives::NodeGroup> group_;
  std::vector<std::unique_ptr<Rank>> ranks_;

  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  uint64_t generation_ = 0;                   // GUARDED_BY(mu_)
  int pending_ = 0;                           // GUARDED_BY(mu_)
  bool stop_ = false;                         // GUARDED_BY(mu_)
  std::exception_ptr error_;                  // GUARDED_BY(mu_)
  std::span<const model::BatchToken> batch_;  // GUARDED_BY(mu_) for the step
  std::vector<float>* logits_ = nullptr;      // rank 0 writes it during the step
  model::TapSink* taps_ = nullptr;            // rank 0 fills it during the step
  Job job_ = Job::kForward;                   // GUARDED_BY(mu_) for the step
  const float* hidden_in_ = nullptr;          // runLayers / runHead input, read by every rank
  const model::TensorShard* read_ = nullptr;  // set: the job is a tensor read, not a step
  std::vector<uint8_t>* read_out_ = nullptr;  // rank 0 writes it during the read (if set)
  std::span<const KvTierBlock> tier_stores_, tier_loads_;  // kTier: read by every rank
};

}  // namespace tpnode::node
