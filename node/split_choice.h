// --split auto at startup: whether it applies, the model's figures for the cost model
// (node/split_plan.h), the prediction of every plan with the memory each node has, and the
// choice every node agrees on (node 0 decides over the probe mesh of node/split_probe.h).
//
// Contract
// - splitChoiceNeeded(): --split auto on more than one node without --pp or --pp-layers (those
//   fix the stages themselves).
// - chooseStagesAtFormation(): collective at startup (every node, before the model's ranks load);
//   node 0 logs the figures, every plan's prediction and the choice as one info block; then
//   every node runs `adopt` with the stages chosen (node/split_probe.h: typically
//   loadChosenStages(), so that a node that cannot load them tells node 0 why); returns the
//   stages to run (1: tensor only), the same on every node. Errors: node/split_probe.h (node 0's
//   names each node that cannot run the stages and why), and Error(kResource) naming the nodes
//   when no plan fits their memory. On GPU ranks only the
//   tensor plan can run (pipeline stages need CPU ranks): the others are shown refused.
// - The compute figures of a rank (docs/scaling.md, "Pipeline and hybrid plans"): every node's
//   own, measured at startup on its CPU ranks (node/split_rates.h: decode's GEMV and a prefill
//   tile on the model's weight type with --tp ranks of --threads threads), or set by
//   --split-rank-read / --split-rank-macs; the plans use the slowest node's. Declared figures
//   stand in where a node has none (GPU ranks, a failed measurement): CPU ranks by --threads,
//   GPU ranks one figure. The local all-reduce is always declared.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/gguf.h"
#include "node/loaded_model.h"
#include "node/options.h"
#include "node/split_plan.h"
#include "node/split_probe.h"
#include "node/split_rates.h"

namespace tpnode::node {

bool splitChoiceNeeded(const Options& options);

// Per-token figures of the whole model from its tensor list: every blk.* tensor's bytes and
// elements (a stacked expert tensor at n_expert_used / n_expert), the output head (the token
// embedding when tied) and output norm.
SplitModelFigures splitModelFigures(const model::ModelConfig& config,
                                    const model::GgufMetadata& meta);

// The declared compute figures of one rank and the local all-reduce, for `options` (--tp,
// --threads, --parallel) on GPU or CPU ranks; the link figures are left for the caller.
SplitClusterFigures declaredClusterFigures(const Options& options, int nodes, bool gpu_ranks);

// This node's rank figures for --split auto: --split-rank-read / --split-rank-macs where set,
// else measured on CPU ranks (node/split_rates.h, with the model's layer weight type and
// n_embd), else unknown (GPU ranks; a failed measurement is logged once). Never throws.
RankRates nodeRankRates(const Options& options, const model::ModelConfig& config,
                        const model::GgufMetadata& meta, bool gpu_ranks);

// Sets `cluster`'s rank figures from every node's (`rates`, 0: unknown): the slowest known
// figure of each kind (the slowest node gates a tensor-parallel step, and a stage on it the
// pipeline), the declared one already in `cluster` where no node knows it; and
// rank_rates_source, how they were obtained.
void applyRankRates(SplitClusterFigures& cluster, const std::vector<RankRates>& rates);

// "node 0: 10.90 GB/s, 70.1 GMAC/s; node 1: ? GB/s, ? GMAC/s" (?: unknown).
std::string describeRankRates(const std::vector<RankRates>& rates);

// Every candidate plan of `cluster` predicted; a plan whose shard plan is refused, or whose
// stage would hold more than a node of it has (`memory`, per node, 0: unknown; balanced by
// bytes as model/stage_plan.h does), carries the refusal.
std::vector<SplitPrediction> predictPlans(const Options& options, const model::ModelConfig& config,
                                          const model::GgufMetadata& meta,
                                          const SplitClusterFigures& cluster,
                                          const std::vector<uint64_t>& memory);

int chooseStagesAtFormation(const Options& options, bool gpu_ranks, const AdoptStages& adopt);

// An `adopt` for node/split_probe.h: loads options.model with `stages` (loadModel() with
// options.pp = stages) into `out` and returns the empty string, or returns the error that
// stopped it (never empty: the model does not open or shard, a stage does not fit this node's
// memory) and leaves `out` as it was.
std::string loadChosenStages(const Options& options, int stages, std::unique_ptr<LoadedModel>& out);

}  // namespace tpnode::node
