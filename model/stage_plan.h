// StagePlan: which contiguous layers each pipeline stage holds. Pure functions of the model's
// tensor list, the shard plan of one stage and the KV cache size; no I/O, table-tested
// (tests/model/stage_plan_test.cc).
//
// Rules
// - Stage 0 (node 0's stage) holds the token embeddings, the output norm and the output head
//   besides its layers: it embeds the tokens, and the last stage returns the final hidden rows
//   of the tokens that need logits to it (docs/architecture.md, "Pipeline stages").
// - Every stage holds at least one layer; the layers of stage s directly follow those of s - 1.
// - Balanced by bytes, not layers: the plan minimizes the largest bytes any node holds (weights
//   of its ranks plus their KV cache), so stage 0 gets fewer layers when the embeddings and the
//   head are large.
// - An explicit plan (--pp-layers) is checked: one range per stage, contiguous, covering every
//   layer once.
// - A stage whose node holds more bytes than the node has (its capacity, when known) is
//   refused with Error(kResource) naming the node, its layers and both sizes.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/shard_plan.h"

namespace tpnode::model {

// Layers [begin, end).
struct LayerRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
  bool contains(int64_t layer) const { return layer >= begin && layer < end; }
  bool operator==(const LayerRange&) const = default;
};

// What the ranks of one stage hold.
struct StagePart {
  LayerRange layers;
  bool first = true;  // token embeddings, output norm and head (stage 0)
  bool last = true;   // the stage that returns the final hidden rows to stage 0
  bool whole(int64_t n_layer) const { return first && last && layers == LayerRange{0, n_layer}; }
};

// Bytes one node of a stage holds, split by where they go.
struct StageCosts {
  std::vector<uint64_t> layer_bytes;  // per layer: weights of the node's ranks + their KV cache
  uint64_t first_stage_bytes = 0;     // stage 0 only: embeddings, output norm, output head
  uint64_t every_stage_bytes = 0;     // tensors every stage holds (rope_freqs)
};

// The costs of `model` on a node of `ranks_per_node` ranks of a stage sharded by `plan`
// (plan.tp ranks per stage), with a KV cache of `slots` x `ctx` positions per layer.
StageCosts stageCosts(const ModelConfig& config, const ShardPlan& plan, int ranks_per_node,
                      int64_t slots, int64_t ctx);

struct StagePlan {
  std::vector<LayerRange> ranges;  // index = stage
  std::vector<uint64_t> bytes;     // bytes on one node of each stage
  bool explicit_ranges = false;    // given (--pp-layers), not balanced
  StagePart part(int stage) const;
  int stages() const { return static_cast<int>(ranges.size()); }
  // The stage that holds tensor `name`: a layer's ("blk.N.") the stage of layer N; any other
  // (embeddings, output norm and head, rope_freqs) stage 0.
  int stageHolding(const std::string& name) const;
  // "stage 0 (node 0): layers 0..9 (10), 1.2 GiB\n..." ; `nodes_per_stage` names the nodes.
  std::string describe(int nodes_per_stage = 1) const;
};

struct StagePlanRequest {
  int stages = 1;
  int nodes_per_stage = 1;                  // to name the nodes of a stage in messages
  std::vector<LayerRange> explicit_ranges;  // --pp-layers; empty: balance by bytes
  std::vector<uint64_t> capacity;  // bytes available per node of each stage; 0 or absent: unknown
};

// Throws Error(kInvalidArgument) for more stages than layers or a bad explicit plan,
// Error(kResource) when a stage does not fit its node's capacity.
StagePlan planStages(const StageCosts& costs, const StagePlanRequest& request);

// "0-9,10-25" (inclusive first-last per stage; "7" is one layer) into ranges; the text only,
// planStages() checks coverage. Error(kInvalidArgument) naming `flag` and the bad entry.
std::vector<LayerRange> parseLayerRanges(const std::string& text,
                                         const std::string& flag = "--pp-layers");

}  // namespace tpnode::model
