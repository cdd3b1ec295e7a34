#include "node/split_plan.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/error.h"

namespace tpnode::node {
namespace {

// The pieces of one step of `b` tokens of one plan, in seconds.
struct StepParts {
  double stage_compute = 0;  // the layers of one stage
  double head = 0;           // stage 0's output head
  double stage_allreduce = 0;
  double logits = 0;
  double boundary = 0;  // one boundary message
  double command = 0;
};

double computeSeconds(double bytes, double macs, double b, double ranks,
                      const SplitClusterFigures& c) {
  return std::max(bytes / (ranks * c.rank_read_bytes_per_s),
                  b * macs / (ranks * c.rank_macs_per_s));
}

StepParts stepParts(const SplitModelFigures& m, const SplitClusterFigures& c, int stages,
                    double b) {
  const int n = c.nodes / stages;  // nodes per stage
  const double ranks = static_cast<double>(n) * c.ranks_per_node;
  const double alpha = c.rtt_us * 1e-6 / 2;
  const double r = c.link_bytes_per_s;
  const double layers = static_cast<double>(m.n_layer) / stages;
  StepParts p;
  p.stage_compute = computeSeconds(m.layer_bytes / stages, m.layer_macs / stages, b, ranks, c);
  p.head = computeSeconds(m.head_bytes, m.head_macs, b, ranks, c);
  const double hidden = 4.0 * static_cast<double>(m.n_embd) * b;  // f32 rows
  double t_ar = c.ranks_per_node > 1 ? c.local_allreduce_us * 1e-6 : 0;
  if (n > 1) t_ar += alpha + (n - 1) * hidden / r;
  p.stage_allreduce = 2 * layers * t_ar;
  if (n > 1) {
    p.logits = alpha + (n - 1) * 4.0 * static_cast<double>(m.n_vocab) * b / n / r;
  }
  if (stages > 1) p.boundary = alpha + hidden / r;
  if (c.nodes > 1) p.command = alpha;
  return p;
}

// One step of every stage in turn.
SplitTerms sequentialStep(const StepParts& p, int stages, double b) {
  SplitTerms t;
  t.compute_ms = (stages * p.stage_compute + p.head) * 1e3;
  t.allreduce_ms = (stages * p.stage_allreduce + p.logits) * 1e3;
  t.boundary_ms = (stages > 1 ? stages * p.boundary : 0) * 1e3;
  t.command_ms = p.command * 1e3;
  t.step_ms = t.compute_ms + t.allreduce_ms + t.boundary_ms + t.command_ms;
  t.tokens_per_s = b / (t.step_ms * 1e-3);
  return t;
}

std::string millis(double ms) {
  return ms >= 100 ? fmt::format("{:.0f}", ms) : fmt::format("{:.3g}", ms);
}

}  // namespace

std::string SplitPrediction::name() const {
  const int nodes = stages * nodes_per_stage;
  if (stages == 1) return fmt::format("tensor {}x{}", nodes, ranks_per_node);
  const std::string tp = ranks_per_node > 1 ? fmt::format(" (tp {} each)", ranks_per_node) : "";
  if (nodes_per_stage == 1) return fmt::format("pipeline {} stages{}", stages, tp);
  return fmt::format("hybrid {} stages x {} nodes{}", stages, nodes_per_stage,
                     ranks_per_node > 1 ? fmt::format(" x tp {}", ranks_per_node) : "");
}

std::vector<int> candidateStages(int nodes, int64_t n_layer) {
  std::vector<int> out;
  for (int s = 1; s <= nodes; ++s) {
    if (nodes % s == 0 && s <= n_layer) out.push_back(s);
  }
  return out;
}

SplitPrediction predictSplit(const SplitModelFigures& m, const SplitClusterFigures& c, int stages) {
  if (c.nodes < 1 || c.ranks_per_node < 1 || stages < 1 || c.nodes % stages != 0) {
    fail(ErrorCode::kInvalidArgument, "split plan: {} stages of {} nodes", stages, c.nodes);
  }
  if (c.rank_read_bytes_per_s <= 0 || c.rank_macs_per_s <= 0 || c.link_bytes_per_s <= 0 ||
      m.n_layer < 1) {
    fail(ErrorCode::kInvalidArgument, "split plan: rates and layers must be positive");
  }
  SplitPrediction p;
  p.stages = stages;
  p.nodes_per_stage = c.nodes / stages;
  p.ranks_per_node = c.ranks_per_node;
  p.parallel = std::max(1, c.parallel);
  p.batch1 = sequentialStep(stepParts(m, c, stages, 1), stages, 1);
  const double b = p.parallel;
  p.batch = sequentialStep(stepParts(m, c, stages, b), stages, b);
  if (c.pipeline_overlaps_decode && stages > 1 && p.parallel > 1) {
    const double micro = std::min(b, static_cast<double>(stages));
    const double mb = b / micro;
    const StepParts q = stepParts(m, c, stages, mb);
    const SplitTerms chain = sequentialStep(q, stages, mb);
    const double stage0 = q.stage_compute + q.head + q.stage_allreduce + q.logits + q.boundary;
    const double round_ms = std::max(micro * stage0 * 1e3, chain.step_ms);
    SplitTerms t = chain;  // the terms of one micro-batch's trip; the round is what counts
    t.step_ms = round_ms;
    t.tokens_per_s = b / (round_ms * 1e-3);
    p.batch = t;
  }
  return p;
}

int chooseSplit(std::span<const SplitPrediction> plans) {
  int best = -1;
  for (size_t i = 0; i < plans.size(); ++i) {
    const SplitPrediction& p = plans[i];
    if (!p.runnable()) continue;
    if (best < 0) {
      best = static_cast<int>(i);
      continue;
    }
    const SplitPrediction& b = plans[static_cast<size_t>(best)];
    const bool better = p.objective() > b.objective() * (1 + 1e-9);
    const bool tie_fewer = p.objective() >= b.objective() * (1 - 1e-9) && p.stages < b.stages;
    if (better || tie_fewer) best = static_cast<int>(i);
  }
  return best;
}

std::string describeSplits(std::span<const SplitPrediction> plans, int chosen,
                           const SplitClusterFigures& c) {
  std::string out = fmt::format(
      "split auto: {} nodes x {} ranks, --parallel {}; links: round trip {:.0f} us, {:.2f} Gbit/s "
      "(slowest link); rank: {:.2f} GB/s read, {:.1f} GMAC/s{}; local all-reduce {:.0f} us; "
      "decode micro-batches {}overlap across stages; ranked by decode tokens/s at {}",
      c.nodes, c.ranks_per_node, c.parallel, c.rtt_us, c.link_bytes_per_s * 8e-9,
      c.rank_read_bytes_per_s * 1e-9, c.rank_macs_per_s * 1e-9,
      c.rank_rates_source.empty() ? std::string() : " (" + c.rank_rates_source + ")",
      c.local_allreduce_us, c.pipeline_overlaps_decode ? "" : "do not ",
      c.parallel <= 1 ? std::string("batch 1") : fmt::format("{} sequences", c.parallel));
  for (size_t i = 0; i < plans.size(); ++i) {
    const SplitPrediction& p = plans[i];
    const char* mark = static_cast<int>(i) == chosen ? "*" : " ";
    if (!p.runnable()) {
      out += fmt::format("\n {} {}: refused: {}", mark, p.name(), p.refused);
      continue;
    }
    const std::string layers = p.layers.empty() ? "" : " [layers " + p.layers + "]";
    out += fmt::format(
        "\n {} {}{}: batch 1 {:.1f} tok/s (step {} ms: compute {}, all-reduce {}, boundaries {}, "
        "command {}); {} sequences {:.1f} tok/s (step {} ms)",
        mark, p.name(), layers, p.batch1.tokens_per_s, millis(p.batch1.step_ms),
        millis(p.batch1.compute_ms), millis(p.batch1.allreduce_ms), millis(p.batch1.boundary_ms),
        millis(p.batch1.command_ms), p.parallel, p.batch.tokens_per_s, millis(p.batch.step_ms));
  }
  out += chosen >= 0 ? fmt::format("\n chosen: {}", plans[static_cast<size_t>(chosen)].name())
                     : std::string("\n chosen: none (no plan can run)");
  return out;
}

}  // namespace tpnode::node
