// LoadedModel: the model file as every node of the cluster sees it before any rank loads its
// shard: the mapped GGUF, its hyperparameters, the cluster's topology and the shard plan for
// it, the tokenizer (used on node 0) and the identity that goes into the cluster fingerprint.
#pragma once

#include <memory>
#include <string>

#include "collectives/topology.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/shard_plan.h"
#include "model/stage_plan.h"
#include "model/tokenizer.h"
#include "node/options.h"

namespace tpnode::node {

struct LoadedModel {
  std::unique_ptr<model::GgufFile> file;
  model::ModelConfig config;
  collectives::Topology topology;  // --tp-layout and --node-id (no devices: node/placement.h)
  model::ShardPlan plan;           // for the tpSize() ranks of one stage of `topology`
  model::StagePlan stages;         // the layers of every pipeline stage (none: tensor only)
  std::unique_ptr<model::Tokenizer> tokenizer;
  std::string identity;  // model::modelIdentity()
  std::string name;      // the served model id: --alias, or modelSlug(the file)
  bool has_chat_template = false;
  std::string chat_template;
};

// --head and --moe-placement as the shard plan takes them.
model::HeadLayout headLayout(HeadFlag head);
model::MoePlacement moePlacement(MoePlacementFlag moe);

// The file name without its folder and ".gguf", each run of other characters than letters,
// digits, '.', '_', '-' (and UTF-8) as one '-': "My Model Q4.gguf" -> "My-Model-Q4".
std::string modelSlug(const std::string& path);

// The cluster's shape: options.tp_layout (filled by finishLayout) and options.node_id, without
// devices (node/placement.h). collectives::Topology::fromLayout: Error(kUnsupported) for a
// layout tpnode cannot run yet. Before the model loads, node counts and ranks come from this;
// after, from LoadedModel::topology (the same value).
collectives::Topology clusterTopology(const Options& options);

// Builds clusterTopology(options) (refusing a layout before anything loads), opens
// options.model, checks that the topology can shard it (the error names the tensor, its size and
// the tp degrees that work), plans the pipeline stages (refusing a plan whose stage does not
// fit this node's memory, naming the node) and logs what will run.
std::unique_ptr<LoadedModel> loadModel(const Options& options);

}  // namespace tpnode::node
