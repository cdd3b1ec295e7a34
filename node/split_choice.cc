#include "node/split_choice.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "common/error.h"
#include "mesh/mesh.h"
#include "model/model_identity.h"
#include "model/shard_plan.h"
#include "model/stage_plan.h"
#include "node/host_memory.h"
#include "node/loaded_model.h"
#include "node/mesh_setup.h"
#include "node/split_probe.h"

namespace tpnode::node {
namespace {

// Declared figures (docs/scaling.md, "Pipeline and hybrid plans"): a CPU thread streams ~4 GB/s
// of quantized weights (3.3 GB/s measured on the loaded dev VM) and does ~16 G multiply-adds/s;
// a GPU rank ~1 TB/s and ~100 T/s (what tpnode's GPU ranks reach, not the HBM peak).
constexpr double kCpuReadPerThread = 4e9;
constexpr double kCpuReadPerRankMax = 24e9;
constexpr double kCpuMacsPerThread = 16e9;
constexpr double kGpuRead = 1e12;
constexpr double kGpuMacs = 100e12;
constexpr double kCpuLocalAllReduceUs = 10;
constexpr double kGpuLocalAllReduceUs = 20;
// The scheduler keeps up to one step per stage in flight (docs/cluster.md, "Keeping the
// pipeline full"): decode groups of sequences overlap across stages.
constexpr bool kPipelineOverlapsDecode = true;

bool isLayerTensor(const std::string& name) {
  return name.rfind("blk.", 0) == 0;
}

}  // namespace

bool splitChoiceNeeded(const Options& o) {
  if (o.split != SplitFlag::kAuto || o.pp > 1 || !o.pp_layers.empty() || o.peers.empty()) {
    return false;
  }
  return mesh::parsePeerList(o.peers).size() > 1;
}

SplitModelFigures splitModelFigures(const model::ModelConfig& c, const model::GgufMetadata& meta) {
  SplitModelFigures f;
  f.n_layer = c.n_layer;
  f.n_embd = c.n_embd;
  f.n_vocab = c.n_vocab;
  for (const model::GgufTensorInfo& t : meta.tensors) {
    if (!isLayerTensor(t.name)) continue;
    double share = 1;
    if (t.n_dims == 3 && c.isMoe() && t.ne[2] > 0) {
      share = static_cast<double>(c.n_expert_used) / static_cast<double>(t.ne[2]);
    }
    f.layer_bytes += static_cast<double>(t.n_bytes) * share;
    if (t.n_dims >= 2) f.layer_macs += static_cast<double>(t.elements()) * share;
  }
  const model::GgufTensorInfo* head = meta.findTensor("output.weight");
  if (head == nullptr) head = meta.findTensor("token_embd.weight");
  if (head != nullptr) {
    f.head_bytes += static_cast<double>(head->n_bytes);
    f.head_macs += static_cast<double>(head->elements());
  }
  if (const model::GgufTensorInfo* norm = meta.findTensor("output_norm.weight")) {
    f.head_bytes += static_cast<double>(norm->n_bytes);
  }
  return f;
}

SplitClusterFigures declaredClusterFigures(const Options& o, int nodes, bool gpu) {
  SplitClusterFigures c;
  c.nodes = nodes;
  c.ranks_per_node = std::max(1, o.tp);
  c.parallel = std::max(1, o.parallel);
  const double threads = std::max(1, o.threads);
  c.rank_read_bytes_per_s =
      gpu ? kGpuRead : std::min(kCpuReadPerRankMax, threads * kCpuReadPerThread);
  c.rank_macs_per_s = gpu ? kGpuMacs : threads * kCpuMacsPerThread;
  c.local_allreduce_us =
      c.ranks_per_node > 1 ? (gpu ? kGpuLocalAllReduceUs : kCpuLocalAllReduceUs) : 0;
  c.pipeline_overlaps_decode = kPipelineOverlapsDecode;
  return c;
}

std::vector<SplitPrediction> predictPlans(const Options& o, const model::ModelConfig& config,
                                          const model::GgufMetadata& meta,
                                          const SplitClusterFigures& cluster,
                                          const std::vector<uint64_t>& memory) {
  const SplitModelFigures figures = splitModelFigures(config, meta);
  const std::vector<model::TensorDesc> descs = model::tensorDescs(meta);
  std::vector<SplitPrediction> out;
  for (int stages : candidateStages(cluster.nodes, config.n_layer)) {
    SplitPrediction p = predictSplit(figures, cluster, stages);
    try {
      const int per_stage = cluster.nodes / stages;
      const model::ShardPlan plan =
          model::planShards(config, descs, per_stage * cluster.ranks_per_node, headLayout(o.head),
                            moePlacement(o.moe_placement));
      // The KV cache as every rank sizes it (node/loaded_model.cc plans the same).
      const model::StageCosts costs = model::stageCosts(
          config, plan, cluster.ranks_per_node, 1, o.kvBlocks() * std::max(1, o.kv_block_size));
      model::StagePlanRequest req;
      req.stages = stages;
      req.nodes_per_stage = per_stage;
      for (int s = 0; s < stages; ++s) {
        uint64_t least = 0;  // the smallest known memory among the stage's nodes
        for (int n = s * per_stage; n < (s + 1) * per_stage; ++n) {
          const uint64_t have = static_cast<size_t>(n) < memory.size() ? memory[n] : 0;
          if (have != 0) least = least == 0 ? have : std::min(least, have);
        }
        req.capacity.push_back(least);
      }
      const model::StagePlan staged = model::planStages(costs, req);
      for (const model::LayerRange& r : staged.ranges) {
        p.layers += fmt::format("{}{}-{}", p.layers.empty() ? "" : ",", r.begin, r.end - 1);
      }
    } catch (const Error& e) {
      p.refused = e.what();
    }
    out.push_back(std::move(p));
  }
  return out;
}

int chooseStagesAtFormation(const Options& o, bool gpu) {
  const std::unique_ptr<model::GgufFile> file = model::GgufFile::open(o.model);
  const model::GgufMetadata& meta = file->metadata();
  const model::ModelConfig config = model::readModelConfig(meta);
  const mesh::MeshOptions mo =
      makeMeshOptions(o, model::modelIdentity(*file), {"phase=split-probe"});
  spdlog::info("[node] --split auto: measuring the links of the {} nodes", mo.peers.size());
  const int stages = agreeOnStages(mo, availableHostMemory(), [&](const FormationFigures& f) {
    SplitClusterFigures c = declaredClusterFigures(o, f.nodes, gpu);
    c.rtt_us = f.rtt_us;
    c.link_bytes_per_s = f.link_bytes_per_s;
    std::vector<SplitPrediction> plans = predictPlans(o, config, meta, c, f.memory);
    for (SplitPrediction& p : plans) {
      if (gpu && p.stages > 1 && p.runnable()) {
        p.refused = "pipeline stages run on CPU ranks only (--backend cpu)";  // node/rank_set.h
      }
    }
    const int chosen = chooseSplit(plans);
    spdlog::info("[driver] {}\n links measured at formation: {}", describeSplits(plans, chosen, c),
                 f.detail);
    if (chosen < 0) {
      fail(ErrorCode::kResource, "--split auto: no plan can run on these {} nodes (see above)",
           f.nodes);
    }
    return plans[static_cast<size_t>(chosen)].stages;
  });
  if (o.node_id != 0) {
    spdlog::info("[node] --split auto: node 0 chose {}", stages == 1
                                                             ? std::string("tensor parallelism")
                                                             : fmt::format("{} stages", stages));
  }
  return stages;
}

}  // namespace tpnode::node
