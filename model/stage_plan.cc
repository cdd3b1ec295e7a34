#include "model/stage_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <sstream>

#include "common/error.h"

namespace tpnode::model {
namespace {

// The layer of "blk.N.<role>", or -1 for a tensor outside the layers.
int64_t layerOf(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  size_t dot = name.find('.', 4);
  if (dot == std::string::npos || dot == 4) return -1;
  int64_t l = 0;
  for (size_t i = 4; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    l = l * 10 + (name[i] - '0');
    if (l > (int64_t{1} << 30)) return -1;
  }
  return l;
}

std::string humanBytes(uint64_t b) {
  if (b >= (uint64_t{1} << 30)) return fmt::format("{:.2f} GiB", b / double(uint64_t{1} << 30));
  if (b >= (uint64_t{1} << 20)) return fmt::format("{:.1f} MiB", b / double(uint64_t{1} << 20));
  return fmt::format("{:.1f} KiB", b / 1024.0);
}

std::string nodesOf(int stage, int nodes_per_stage) {
  if (nodes_per_stage <= 1) return fmt::format("node {}", stage);
  return fmt::format("nodes {}..{}", stage * nodes_per_stage, (stage + 1) * nodes_per_stage - 1);
}

uint64_t stageBytes(const StageCosts& c, int stage, LayerRange r) {
  uint64_t b = c.every_stage_bytes + (stage == 0 ? c.first_stage_bytes : 0);
  for (int64_t l = r.begin; l < r.end; ++l) b += c.layer_bytes[static_cast<size_t>(l)];
  return b;
}

void checkExplicit(const std::vector<LayerRange>& ranges, int stages, int64_t n_layer) {
  if (static_cast<int>(ranges.size()) != stages) {
    fail(ErrorCode::kInvalidArgument, "--pp-layers gives {} layer range(s) for {} stage(s)",
         ranges.size(), stages);
  }
  int64_t next = 0;
  for (size_t s = 0; s < ranges.size(); ++s) {
    const LayerRange& r = ranges[s];
    if (r.begin != next) {
      fail(ErrorCode::kInvalidArgument,
           "--pp-layers: stage {} starts at layer {}, but the layers must follow on from the "
           "previous stage (expected layer {})",
           s, r.begin, next);
    }
    if (r.end <= r.begin) {
      fail(ErrorCode::kInvalidArgument, "--pp-layers: stage {} holds no layer", s);
    }
    next = r.end;
  }
  if (next != n_layer) {
    fail(ErrorCode::kInvalidArgument,
         "--pp-layers covers layers 0..{} but the model has {} layers (0..{})", next - 1, n_layer,
         n_layer - 1);
  }
}

// Contiguous ranges minimizing the largest stage's bytes (exact: dynamic programming over
// (stage, first layer of the next stage)); ties go to the first split found, so every node
// computes the same plan.
std::vector<LayerRange> balance(const StageCosts& c, int stages) {
  const int64_t n = static_cast<int64_t>(c.layer_bytes.size());
  constexpr uint64_t kInf = std::numeric_limits<uint64_t>::max();
  // best[s][i]: the smallest maximum over stages 0..s-1 holding layers [0, i).
  std::vector<std::vector<uint64_t>> best(static_cast<size_t>(stages) + 1,
                                          std::vector<uint64_t>(static_cast<size_t>(n) + 1, kInf));
  std::vector<std::vector<int64_t>> cut(best.size(), std::vector<int64_t>(best[0].size(), -1));
  best[0][0] = 0;
  for (int s = 1; s <= stages; ++s) {
    for (int64_t i = s; i <= n - (stages - s); ++i) {
      for (int64_t j = s - 1; j < i; ++j) {
        if (best[s - 1][j] == kInf) continue;
        const uint64_t v = std::max(best[s - 1][j], stageBytes(c, s - 1, {j, i}));
        if (v < best[s][i]) {
          best[s][i] = v;
          cut[s][i] = j;
        }
      }
    }
  }
  std::vector<LayerRange> ranges(static_cast<size_t>(stages));
  int64_t end = n;
  for (int s = stages; s >= 1; --s) {
    const int64_t begin = cut[s][end];
    ranges[static_cast<size_t>(s - 1)] = {begin, end};
    end = begin;
  }
  return ranges;
}

}  // namespace

StageCosts stageCosts(const ModelConfig& config, const ShardPlan& plan, int ranks_per_node,
                      int64_t slots, int64_t ctx) {
  StageCosts c;
  c.layer_bytes.assign(static_cast<size_t>(config.n_layer), 0);
  const int ranks = std::clamp(ranks_per_node, 1, plan.tp);
  for (const TensorShard& s : plan.shards) {
    const int64_t layer = layerOf(s.tensor.name);
    for (int r = 0; r < ranks; ++r) {
      const bool untied_head = s.tensor.name == "output.weight";
      if (untied_head && !plan.vocab_parallel_head && r != 0) continue;  // rank 0 only
      const uint64_t b = s.bytesFor(r, plan.tp);
      if (layer >= 0 && layer < config.n_layer) {
        c.layer_bytes[static_cast<size_t>(layer)] += b;
      } else if (s.tensor.name == "token_embd.weight" || s.tensor.name == "output_norm.weight" ||
                 untied_head) {
        c.first_stage_bytes += b;
      } else {
        c.every_stage_bytes += b;
      }
    }
    // The KV cache of a layer: K and V rows (F32) of the rank's kv heads, per slot and position.
    if (layer >= 0 && layer < config.n_layer &&
        s.tensor.name == fmt::format("blk.{}.attn_k.weight", layer)) {
      for (int r = 0; r < ranks; ++r) {
        const Slice sl = s.sliceFor(r, plan.tp);
        const uint64_t row_floats = sl.row_end - sl.row_begin;
        c.layer_bytes[static_cast<size_t>(layer)] +=
            2 * row_floats * sizeof(float) * static_cast<uint64_t>(slots * ctx);
      }
    }
  }
  return c;
}

StagePlan planStages(const StageCosts& costs, const StagePlanRequest& req) {
  const int64_t n_layer = static_cast<int64_t>(costs.layer_bytes.size());
  if (req.stages < 1) fail(ErrorCode::kInvalidArgument, "{} pipeline stages", req.stages);
  if (req.stages > n_layer) {
    fail(ErrorCode::kInvalidArgument,
         "--pp {}: the model has {} layers, and every stage needs at least one", req.stages,
         n_layer);
  }
  StagePlan plan;
  if (!req.explicit_ranges.empty()) {
    checkExplicit(req.explicit_ranges, req.stages, n_layer);
    plan.ranges = req.explicit_ranges;
    plan.explicit_ranges = true;
  } else {
    plan.ranges = balance(costs, req.stages);
  }
  for (int s = 0; s < req.stages; ++s) {
    plan.bytes.push_back(stageBytes(costs, s, plan.ranges[static_cast<size_t>(s)]));
  }
  for (int s = 0; s < req.stages; ++s) {
    const uint64_t have = static_cast<size_t>(s) < req.capacity.size() ? req.capacity[s] : 0;
    const uint64_t need = plan.bytes[static_cast<size_t>(s)];
    if (have == 0 || need <= have) continue;
    const LayerRange r = plan.ranges[static_cast<size_t>(s)];
    fail(ErrorCode::kResource,
         "{} (pipeline stage {}, layers {}..{}{}) would hold {} of weights and KV cache but has "
         "{} available; give it fewer layers (--pp-layers), more nodes or a smaller --ctx-size "
         "/ --parallel",
         nodesOf(s, req.nodes_per_stage), s, r.begin, r.end - 1,
         s == 0 ? ", embeddings and output head" : "", humanBytes(need), humanBytes(have));
  }
  return plan;
}

int StagePlan::stageHolding(const std::string& name) const {
  const int64_t layer = layerOf(name);
  for (int s = 0; s < stages(); ++s) {
    if (ranges[static_cast<size_t>(s)].contains(layer)) return s;
  }
  return 0;
}

StagePart StagePlan::part(int stage) const {
  StagePart p;
  p.layers = ranges.at(static_cast<size_t>(stage));
  p.first = stage == 0;
  p.last = stage + 1 == stages();
  return p;
}

std::string StagePlan::describe(int nodes_per_stage) const {
  std::string out = fmt::format("pipeline plan, {} stages ({}):\n", stages(),
                                explicit_ranges ? "--pp-layers" : "balanced by bytes");
  for (int s = 0; s < stages(); ++s) {
    const LayerRange r = ranges[static_cast<size_t>(s)];
    out +=
        fmt::format("  stage {} ({}): layers {}..{} ({}){}, {}\n", s, nodesOf(s, nodes_per_stage),
                    r.begin, r.end - 1, r.size(), s == 0 ? " + embeddings and head" : "",
                    humanBytes(bytes[static_cast<size_t>(s)]));
  }
  return out;
}

std::vector<LayerRange> parseLayerRanges(const std::string& text, const std::string& flag) {
  std::vector<LayerRange> out;
  std::stringstream ss(text);
  std::string item;
  auto number = [&](const std::string& s) -> int64_t {
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) {
      fail(ErrorCode::kInvalidArgument,
           "{} '{}': '{}' is not a layer range (first-last, e.g. 0-9,10-25)", flag, text, item);
    }
    return std::stoll(s);
  };
  while (std::getline(ss, item, ',')) {
    const size_t dash = item.find('-');
    const int64_t first = number(item.substr(0, dash));
    const int64_t last = dash == std::string::npos ? first : number(item.substr(dash + 1));
    if (last < first) {
      fail(ErrorCode::kInvalidArgument, "{} '{}': '{}' ends before it starts", flag, text, item);
    }
    out.push_back({first, last + 1});
  }
  if (out.empty()) fail(ErrorCode::kInvalidArgument, "{} is empty", flag);
  return out;
}

}  // namespace tpnode::model
