#include "node/loaded_model.h"

#include <cctype>
#include <filesystem>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/error.h"
#include "model/model_identity.h"
#include "model/vocab_gguf.h"
#include "node/host_memory.h"

namespace tpnode::node {

model::HeadLayout headLayout(HeadFlag head) {
  switch (head) {
    case HeadFlag::kVocabParallel:
      return model::HeadLayout::kVocabParallel;
    case HeadFlag::kReplicated:
      return model::HeadLayout::kReplicated;
    case HeadFlag::kAuto:
      break;
  }
  return model::HeadLayout::kAuto;
}

model::MoePlacement moePlacement(MoePlacementFlag moe) {
  switch (moe) {
    case MoePlacementFlag::kSlice:
      return model::MoePlacement::kSlice;
    case MoePlacementFlag::kExpert:
      return model::MoePlacement::kExpert;
    case MoePlacementFlag::kAuto:
      break;
  }
  return model::MoePlacement::kAuto;
}

std::string modelSlug(const std::string& path) {
  std::filesystem::path p(path);
  std::string stem = p.extension() == ".gguf" ? p.stem().string() : p.filename().string();
  std::string slug;
  for (char c : stem) {
    const bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' ||
                      c == '-' || (static_cast<unsigned char>(c) & 0x80);
    if (keep) {
      slug += c;
    } else if (!slug.empty() && slug.back() != '-') {
      slug += '-';
    }
  }
  while (!slug.empty() && slug.back() == '-') slug.pop_back();
  return slug.empty() ? "model" : slug;
}

collectives::Topology clusterTopology(const Options& o) {
  return collectives::Topology::fromLayout(o.tp_layout, o.node_id).withStages(std::max(1, o.pp));
}

namespace {

// The layers of every stage; this node's stage checked against the memory it has.
model::StagePlan planPipeline(const Options& o, const LoadedModel& m) {
  const collectives::Topology& topo = m.topology;
  model::StagePlanRequest req;
  req.stages = topo.stages();
  req.nodes_per_stage = topo.nodesPerStage();
  if (!o.pp_layers.empty()) req.explicit_ranges = model::parseLayerRanges(o.pp_layers);
  req.capacity.assign(static_cast<size_t>(topo.stages()), 0);
  req.capacity[static_cast<size_t>(topo.stage())] = offeredHostMemory(o.host_memory_gib);
  const model::StageCosts costs = model::stageCosts(m.config, m.plan, topo.ranksPerNode(), 1,
                                                    o.kvBlocks() * std::max(1, o.kv_block_size));
  return model::planStages(costs, req);
}

}  // namespace

std::unique_ptr<LoadedModel> loadModel(const Options& o) {
  auto m = std::make_unique<LoadedModel>();
  m->topology = clusterTopology(o);
  spdlog::info("[model] opening {}", o.model);
  m->file = model::GgufFile::open(o.model);
  const auto& meta = m->file->metadata();
  m->config = model::readModelConfig(meta);
  m->identity = model::modelIdentity(*m->file);
  m->name = o.alias.empty() ? modelSlug(o.model) : o.alias;
  const std::string general_name = meta.getStringOr("general.name", m->name);
  m->chat_template = meta.getStringOr("tokenizer.chat_template", "");
  m->has_chat_template = !m->chat_template.empty();
  m->tokenizer = std::make_unique<model::Tokenizer>(model::loadVocab(*m->file));

  const collectives::Topology& topo = m->topology;
  m->plan = model::planShards(m->config, model::tensorDescs(meta), topo.tpSize(),
                              headLayout(o.head), moePlacement(o.moe_placement));
  if (topo.pipelined()) {
    m->stages = planPipeline(o, *m);
    spdlog::info("[model] {}", m->stages.describe(topo.nodesPerStage()));
  }
  spdlog::info("[model] {} (served as '{}'; {}), {}", general_name, m->name, m->config.summary(),
               m->identity);
  spdlog::info("[model] shard plan for {} ranks ({} nodes x {} local{}):\n{}", topo.tpSize(),
               topo.nodes(), topo.ranksPerNode(),
               topo.pipelined() ? fmt::format(", {} pipeline stages", topo.stages()) : "",
               m->plan.describe());
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  if (static_cast<unsigned>(o.tp * o.threads) > cores) {
    spdlog::warn(
        "[node] {} local ranks x {} threads exceed the {} cores of this host; expect "
        "slow steps (lower --threads or --tp)",
        o.tp, o.threads, cores);
  }
  return m;
}

}  // namespace tpnode::node
