// SplitPlan: the cost model behind `--split auto`. Pure functions of the model's per-token
// figures and the cluster's (node count, ranks per node, --parallel, the link figures the mesh
// measured at formation, the compute figures of one rank, given by the caller: node/split_choice.h
// measures them at startup); no I/O, table-tested
// (tests/node/split_plan_test.cc). docs/scaling.md ("Pipeline and hybrid plans") gives the same
// formulas; tools/scaling-model.py `split` mirrors them (tests/node/split_plan_cases.json is
// checked by both).
//
// Plans: S pipeline stages of N / S nodes each (S divides N, S <= layers); inside a stage every
// layer is split over the stage's N / S x g ranks (tensor parallelism). S = 1 is tensor only,
// S = N pipeline only, anything between a hybrid.
//
// One step of b tokens (decode: one token per running sequence), stages run in turn:
//   alpha      = rtt / 2 (one-way latency), R = link bytes per second, n = N / S, ranks = n g
//   compute(b) = max(bytes / (ranks x read rate), b x macs / (ranks x mac rate)) per part
//                (the layers of a stage, or stage 0's output head)
//   t_ar(m)    = local all-reduce (g > 1) + [n > 1] (alpha + (n - 1) m / R)      (direct exchange)
//   T(b)       = S x (compute_stage(b) + 2 (L / S) t_ar(4 n_embd b))
//                + compute_head(b) + [n > 1] (alpha + (n - 1) 4 n_vocab b / n / R)   (logits)
//                + [S > 1] S (alpha + 4 n_embd b / R)                      (stage boundaries)
//                + [N > 1] alpha                                             (step command)
// Batch 1: 1 / T(1) tokens/s. A batch of B = --parallel sequences: B / T(B), or, when the
// pipeline overlaps decode micro-batches (M = min(B, S) of B / M sequences each, one per stage
// at a time): B / max(M x stage-0 time(B / M), T(B / M)).
//
// The choice (chooseSplit): the plan with the highest predicted decode tokens/s for the
// configured --parallel (batch 1 when --parallel is 1, else the aggregate of B sequences);
// plans that cannot run (refused: memory, a shard plan) are never chosen; a tie goes to fewer
// stages.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tpnode::node {

// What the model costs per decoded token, whatever the split (sums over all ranks).
struct SplitModelFigures {
  int64_t n_layer = 1;
  int64_t n_embd = 0;
  int64_t n_vocab = 0;
  double layer_bytes = 0;  // weight bytes of all layers read per step (MoE: experts used)
  double layer_macs = 0;   // multiply-accumulates per token in all layers
  double head_bytes = 0;   // output norm and head, read once per step on stage 0
  double head_macs = 0;    // per token that needs logits
};

// The cluster and its links.
struct SplitClusterFigures {
  int nodes = 1;
  int ranks_per_node = 1;                 // --tp
  int parallel = 1;                       // --parallel: concurrent sequences (B)
  double rtt_us = 0;                      // the slowest link's median round trip (small message)
  double link_bytes_per_s = 1e9;          // the slowest link's bandwidth
  double rank_read_bytes_per_s = 0;       // weight bytes one rank streams per second
  double rank_macs_per_s = 0;             // multiply-accumulates one rank does per second
  double local_allreduce_us = 0;          // one all-reduce among the ranks of a node (g > 1)
  bool pipeline_overlaps_decode = false;  // stages work on different decode micro-batches at once
  std::string rank_rates_source;          // how the rank figures were obtained ("" : not said)
};

// Where the time of one step goes (milliseconds) and what it gives.
struct SplitTerms {
  double compute_ms = 0;    // layers and head
  double allreduce_ms = 0;  // the layers' all-reduces and the logits gather
  double boundary_ms = 0;   // hidden state between stages and back to node 0
  double command_ms = 0;    // the step command to the workers
  double step_ms = 0;       // one step (with overlap: one round of every micro-batch)
  double tokens_per_s = 0;
};

struct SplitPrediction {
  int stages = 1;
  int nodes_per_stage = 1;
  int ranks_per_node = 1;
  SplitTerms batch1;    // one sequence
  SplitTerms batch;     // --parallel sequences
  int parallel = 1;     // B of `batch`
  std::string refused;  // non-empty: the plan cannot run here, and why
  std::string layers;   // the stages' layers as --pp-layers writes them ("0-7,8-15"), if known

  bool runnable() const { return refused.empty(); }
  // Tokens/s the choice ranks by: batch 1 when parallel is 1, else the aggregate of `batch`.
  double objective() const { return parallel <= 1 ? batch1.tokens_per_s : batch.tokens_per_s; }
  // "tensor 4x1", "pipeline 4 stages", "hybrid 2 stages x 2 nodes (tp 2 each)".
  std::string name() const;
};

// Stage counts worth predicting for `nodes` nodes and a model of `n_layer` layers: every
// divisor of `nodes` that is at most n_layer, ascending (1 = tensor only).
std::vector<int> candidateStages(int nodes, int64_t n_layer);

// The prediction of `stages` stages (a candidate of candidateStages()). Error(kInvalidArgument)
// for stages that do not divide the nodes or non-positive rates.
SplitPrediction predictSplit(const SplitModelFigures& model, const SplitClusterFigures& cluster,
                             int stages);

// Index of the plan to run (see the header comment); -1 when none is runnable.
int chooseSplit(std::span<const SplitPrediction> plans);

// The startup block: the figures used, one line per plan (predicted tokens/s at batch 1 and
// at --parallel, the terms, or why it is refused), and the chosen plan.
std::string describeSplits(std::span<const SplitPrediction> plans, int chosen,
                           const SplitClusterFigures& cluster);

}  // namespace tpnode::node
