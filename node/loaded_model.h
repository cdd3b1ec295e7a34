// LoadedModel: the model file as every node of the cluster sees it before any rank loads its
// shard: the mapped GGUF, its hyperparameters, the shard plan for the whole cluster, the
// tokenizer (used on node 0) and the identity that goes into the cluster fingerprint.
#pragma once

#include <memory>
#include <string>

#include "model/config.h"
#include "model/gguf.h"
#include "model/shard_plan.h"
#include "model/tokenizer.h"
#include "node/options.h"

namespace tpnode::node {

struct LoadedModel {
  std::unique_ptr<model::GgufFile> file;
  model::ModelConfig config;
  model::ShardPlan plan;  // for the global group: sum of tp over nodes
  std::unique_ptr<model::Tokenizer> tokenizer;
  std::string identity;  // model::modelIdentity()
  std::string name;      // general.name, or the file name
  bool has_chat_template = false;
  std::string chat_template;
};

// Opens options.model, checks that the layout in options.tp_layout can shard it (the error
// names the tensor, its size and the tp degrees that work) and logs what will run.
std::unique_ptr<LoadedModel> loadModel(const Options& options);

}  // namespace tpnode::node
