#include "node/split_choice.h"

#include <algorithm>
#include <chrono>
#include <exception>

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

// Declared figures, where a node measured none (docs/scaling.md, "Pipeline and hybrid plans"): a
// CPU thread streams ~4 GB/s of quantized weights and does ~16 G multiply-adds/s (conservative:
// one thread of the dev VM measures ~11 GB/s and ~70 G/s on Q8_0); a GPU rank ~1 TB/s and
// ~100 T/s (what tpnode's GPU ranks reach, not the HBM peak).
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
// How long a node times its ranks at startup (node/split_rates.h), after the set-up.
constexpr std::chrono::milliseconds kRateBudget{120};

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

RankRates nodeRankRates(const Options& o, const model::ModelConfig& config,
                        const model::GgufMetadata& meta, bool gpu) {
  RankRates r;
  r.read_bytes_per_s = o.split_rank_read_gbps * 1e9;
  r.macs_per_s = o.split_rank_gmacs * 1e9;
  if (r.known() || gpu) return r;
  RankRateProbe probe;
  probe.type = rateProbeType(meta);
  probe.cols = config.n_embd;
  probe.ranks = std::max(1, o.tp);
  probe.threads = std::max(1, o.threads);
  probe.budget = kRateBudget;
  try {
    const RankRateMeasurement m = measureRankRates(probe);
    spdlog::info(
        "[node] --split auto: a rank of this node reads {:.2f} GB/s ({}, {:.0f} MiB from memory, "
        "best of {} calls) and does {:.1f} G multiply-adds/s ({}-token tile, best of {}); {} "
        "rank(s) x {} thread(s) measured together in {:.0f} ms ({:.0f} ms of set-up)",
        m.rates.read_bytes_per_s * 1e-9, model::tensorTypeName(probe.type),
        static_cast<double>(m.read_bytes) / (1 << 20), m.read_passes, m.rates.macs_per_s * 1e-9,
        kTileTokens, m.tile_passes, probe.ranks, probe.threads, m.seconds * 1e3,
        m.setup_seconds * 1e3);
    if (r.read_bytes_per_s <= 0) r.read_bytes_per_s = m.rates.read_bytes_per_s;
    if (r.macs_per_s <= 0) r.macs_per_s = m.rates.macs_per_s;
  } catch (const Error& e) {
    spdlog::warn(
        "[node] --split auto: could not measure this node's ranks ({}); node 0 uses "
        "declared figures for them",
        e.what());
  }
  return r;
}

void applyRankRates(SplitClusterFigures& c, const std::vector<RankRates>& rates) {
  double read = 0, macs = 0;
  size_t known_read = 0, known_macs = 0;
  for (const RankRates& r : rates) {
    if (r.read_bytes_per_s > 0) {
      read = known_read++ == 0 ? r.read_bytes_per_s : std::min(read, r.read_bytes_per_s);
    }
    if (r.macs_per_s > 0) macs = known_macs++ == 0 ? r.macs_per_s : std::min(macs, r.macs_per_s);
  }
  if (read > 0) c.rank_read_bytes_per_s = read;
  if (macs > 0) c.rank_macs_per_s = macs;
  if (known_read == rates.size() && known_macs == rates.size() && !rates.empty()) {
    c.rank_rates_source = fmt::format("per node, slowest of {}", rates.size());
  } else if (known_read == 0 && known_macs == 0) {
    c.rank_rates_source = "declared";
  } else {
    c.rank_rates_source =
        fmt::format("per node, slowest of {} and {} node(s) known; declared for the rest",
                    std::max(known_read, known_macs), std::min(known_read, known_macs));
  }
}

std::string describeRankRates(const std::vector<RankRates>& rates) {
  std::string out;
  for (size_t n = 0; n < rates.size(); ++n) {
    const RankRates& r = rates[n];
    out += fmt::format("{}node {}: ", n == 0 ? "" : "; ", n);
    out += r.read_bytes_per_s > 0 ? fmt::format("{:.2f} GB/s", r.read_bytes_per_s * 1e-9)
                                  : std::string("? GB/s");
    out += r.macs_per_s > 0 ? fmt::format(", {:.1f} GMAC/s", r.macs_per_s * 1e-9)
                            : std::string(", ? GMAC/s");
  }
  return out;
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

std::string loadChosenStages(const Options& o, int stages, std::unique_ptr<LoadedModel>& out) {
  Options chosen = o;
  chosen.pp = stages;
  try {
    out = loadModel(chosen);
  } catch (const std::exception& e) {  // Error, or the allocator's
    return e.what()[0] != '\0' ? std::string(e.what()) : std::string("loading failed");
  }
  return {};
}

int chooseStagesAtFormation(const Options& o, bool gpu, const AdoptStages& adopt) {
  const std::unique_ptr<model::GgufFile> file = model::GgufFile::open(o.model);
  const model::GgufMetadata& meta = file->metadata();
  const model::ModelConfig config = model::readModelConfig(meta);
  const mesh::MeshOptions mo = makeMeshOptions(o, model::modelIdentity(*file), {kSplitProbePhase});
  spdlog::info("[node] --split auto: measuring the links of the {} nodes", mo.peers.size());
  auto measure = [&] { return nodeRankRates(o, config, meta, gpu); };
  const int stages = agreeOnStages(
      mo, offeredHostMemory(o.host_memory_gib), measure,
      [&](const FormationFigures& f) {
        SplitClusterFigures c = declaredClusterFigures(o, f.nodes, gpu);
        c.rtt_us = f.rtt_us;
        c.link_bytes_per_s = f.link_bytes_per_s;
        applyRankRates(c, f.rates);
        std::vector<SplitPrediction> plans = predictPlans(o, config, meta, c, f.memory);
        const int chosen = chooseSplit(plans);
        spdlog::info("[driver] {}\n links measured at formation: {}\n rank figures (per rank): {}",
                     describeSplits(plans, chosen, c), f.detail, describeRankRates(f.rates));
        if (chosen < 0) {
          fail(ErrorCode::kResource, "--split auto: no plan can run on these {} nodes (see above)",
               f.nodes);
        }
        return plans[static_cast<size_t>(chosen)].stages;
      },
      adopt);
  if (o.node_id != 0) {
    spdlog::info("[node] --split auto: node 0 chose {}", stages == 1
                                                             ? std::string("tensor parallelism")
                                                             : fmt::format("{} stages", stages));
  }
  return stages;
}

}  // namespace tpnode::node
