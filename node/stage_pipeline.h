// StagePipeline: one step of a pipeline split as this node runs it. Every node of the cluster
// expands the same StepCommand into the same batch and calls run() with it; the hidden state
// of the batch's tokens passes stage to stage over the mesh (node/pipeline_wire.h):
//   stage 0:    embeddings + its layers -> send to stage 1; ... ; receive the final rows of the
//               tokens marked `logits` from the last stage -> output head -> logits (sampled).
//   stage s>0:  receive from stage s - 1 -> its layers -> send to stage s + 1, or (the last
//               stage) the rows of the tokens marked `logits` to stage 0.
// A step of many tokens (prompt chunks, many sequences) is cut into micro-batches: contiguous
// runs of its tokens, one message each per boundary, so that stage s + 1 runs micro-batch i
// while stage s runs i + 1 (every node cuts the same batch the same way: microBatches()).
// The output head stays on stage 0: it holds token_embd anyway (the embeddings; a tied head
// is that matrix), and a row of n_embd floats is far smaller than a row of logits.
//
// Taps (model/taps.h): every node gets the step's taps with the step (StepCommand::taps); the
// first node of the stage that holds a tap's layer takes it (its local rank 0, over every
// micro-batch), and, on a later stage, sends the stage's taps of the step to node 0 on
// kTagPipelineReport (one kTaps message per step that has taps on its layers, after its forward
// messages). Node 0 receives them when it finishes the step, after the returned rows.
// Expert load (a mixture of experts): the first node of every later stage reports its ranks'
// token-expert pairs to node 0 after each step (kExperts, after the taps); expertLoad() on
// node 0 gives every stage's ranks, stage after stage.
//
// The Redis KV tier (node/kv_tier_rank.h): every node runs runKvTier() for every kKvTier
// command, in command order among its steps; each stage's ranks agree inside the stage
// (RankSet::runKvTier). When the command loads blocks, the first node of every later stage
// sends its stage's flags to node 0 (kTierLoads on kTagPipelineTier, after the steps it ran
// before the command), and node 0 ANDs them with stage 0's: a block counts as loaded only if
// every rank of every stage imported it. A command that only stores sends nothing and waits for
// nobody. The other nodes do not learn node 0's result: a block it counts as not loaded is
// prefilled again by every stage in a later step, overwriting what was imported.
//
// Steps in flight (keeping the pipeline full): on stage 0 a step is two calls, begin() (its
// layers, the forward messages) and finish() (the last stage's rows, the head, the logits), so
// that node 0 can begin the steps of other sequences while the later stages still run earlier
// ones: begin(A), begin(B), finish(A), begin(C), finish(B), ... The other stages just run
// each step when its hidden state arrives (run()), in the order the steps were begun. The
// steps in flight must touch disjoint KV slots (node/scheduler.h), or write a sequence's
// positions in order.
//
// Contract
// - A stage of several nodes: node j of stage s sends to node j of stage s + 1 (and node j of
//   the last stage to node j of stage 0); all of them run the same step, their ranks meeting in
//   the stage's collectives.
// - run(), begin() and finish() are called from one thread (the step loop), in step order on
//   every node; messages of one step are matched by the step number, which every node counts
//   from 1 in a session (one number per begin() or run()). begin() and finish() on stage 0
//   only; every node of stage 0 calls them in the same order (node 0 tells the others when to
//   finish: StepKind::kRetire), since the head's collectives meet across the stage's ranks.
//   finish() completes the oldest step begun and not finished. run() on stage 0 is begin()
//   and finish() of one step, with no other step in flight.
// - The mesh and the RankSet outlive the pipeline. A peer lost while a step waits on it throws
//   Error(kPeerLost) from the mesh (the session then ends, as for a collective); a message that
//   does not match the step throws Error(kInvalidData). A node whose step fails sends an abort
//   to the node it would have sent to (node/pipeline_wire.h), so that every later stage and
//   stage 0 fail the step at once, not after --step-timeout.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "collectives/topology.h"
#include "mesh/mesh.h"
#include "model/rank_model.h"
#include "model/stage_plan.h"
#include "model/taps.h"
#include "node/pipeline_wire.h"
#include "node/rank_set.h"

namespace tpnode::node {

class StagePipeline {
 public:
  // `layers`: the layers of every stage (model::StagePlan::ranges), for the taps.
  StagePipeline(mesh::Mesh& mesh, const collectives::Topology& topology, RankSet& ranks,
                int64_t n_embd, std::vector<model::LayerRange> layers);

  // One step (see above). `logits` as RankSet::run gives them on stage 0; empty elsewhere.
  // `taps`: the step's taps; `out` (node 0 only, may be null): every tap's rows, specs = taps.
  void run(std::span<const model::BatchToken> batch, std::vector<float>& logits,
           std::span<const model::TapSpec> taps = {}, model::TapSink* out = nullptr);

  // Stage 0: this stage's part of a step (the batch and its taps are kept until finish()).
  void begin(std::span<const model::BatchToken> batch, std::span<const model::TapSpec> taps = {});
  // Stage 0: the oldest step begun and not finished: its logits, as run() gives them, and
  // (node 0, `out` not null) its taps from every stage, as run() gives them.
  void finish(std::vector<float>& logits, model::TapSink* out = nullptr);
  // Stage 0: steps begun and not finished.
  size_t inFlight() const { return flight_.size(); }
  // Stage 0: the step number finish() completes next (0: none in flight).
  uint64_t oldestInFlight() const { return flight_.empty() ? 0 : flight_.front().step; }
  // Stage 0: the steps begun while another step was in flight (the overlap begin() gives).
  uint64_t overlappedSteps() const { return overlapped_; }
  // Node 0, a mixture of experts: the token-expert pairs routed to the experts of every rank of
  // every stage (stage 0's ranks, then stage 1's, ...), as RankSet::expertLoadByRank counts
  // them; a later stage's as of the last step finished. Empty for dense models. Between steps.
  std::vector<uint64_t> expertLoad() const;

  // The Redis KV tier's command (see above): stores, then loads, the named blocks on this
  // node's ranks. Node 0: for each of `loads`, whether every rank of every stage imported it;
  // another node: whether every rank of its stage did. Error(kInvalidData) on node 0 for a
  // malformed or foreign stage report, Error(kPeerLost) for a stage that failed the round.
  std::vector<bool> runKvTier(std::span<const KvTierBlock> stores,
                              std::span<const KvTierBlock> loads);

  uint64_t steps() const { return step_; }
  // Micro-batches of a step of `tokens` tokens: one per kMinMicroBatchTokens, at most one per
  // stage, at least one. Small decode steps stay whole (each micro-batch reads the stage's
  // weights again, which costs more than the overlap gains when the step is bound by them).
  uint32_t microBatches(size_t tokens) const;
  static constexpr size_t kMinMicroBatchTokens = 32;

 private:
  struct InFlight {
    uint64_t step = 0;
    std::vector<model::BatchToken> batch;
    std::vector<model::TapSpec> taps;  // the step's
    model::TapSink stage_taps;         // node 0: those of stage 0's layers, taken by begin()
  };
  int peerIn(int stage) const;  // this node's counterpart in `stage`
  // The step's taps on `stage`'s layers, in the step's order.
  std::vector<model::TapSpec> tapsOf(int stage, std::span<const model::TapSpec> taps) const;
  // This stage's layers for every micro-batch of the step, sending each on (the last stage:
  // the logits rows to stage 0, or into rows_ when it is stage 0 as well). The first node of
  // the stage takes the taps of its layers into `sink`; a later stage's sends them to node 0.
  void runForward(std::span<const model::BatchToken> batch, std::span<const model::TapSpec> taps,
                  model::TapSink& sink);
  void finishOldest(InFlight& f, std::vector<float>& logits, model::TapSink* out);
  void sendAbort(uint64_t step) noexcept;
  void send(int node, uint32_t tag, const HiddenHeader& h, const float* rows);
  void recv(int node, uint32_t tag, const HiddenHeader& h, std::vector<float>& out);

  mesh::Mesh& mesh_;
  const collectives::Topology topology_;
  RankSet& ranks_;
  const uint32_t n_embd_;
  const std::vector<model::LayerRange> layers_;    // of every stage
  const bool moe_;                                 // the ranks count expert load
  const uint32_t stage_ranks_;                     // ranks of a stage (the load's entries)
  std::vector<std::vector<uint64_t>> stage_load_;  // node 0: each later stage's last report
  uint64_t step_ = 0;
  uint64_t tier_round_ = 0;  // runKvTier() calls this session (every node counts them alike)
  uint64_t overlapped_ = 0;
  std::deque<InFlight> flight_;  // stage 0: begun, not finished, oldest first
  std::vector<float> hidden_in_, hidden_out_, rows_;
  std::vector<std::byte> bytes_;
};

}  // namespace tpnode::node
