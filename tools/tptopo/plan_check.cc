#include "tools/tptopo/plan_check.h"

#include <algorithm>

#include "common/error.h"
#include "model/config.h"
#include "model/gguf.h"
#include "node/split_choice.h"

namespace tpnode::tptopo {

PlanInfo planReport(const TopoOptions& t, int nodes, const std::vector<LinkResult>& links) {
  PlanInfo p;
  p.ran = true;
  p.model = t.plan_model;
  p.parallel = std::max(1, t.plan_parallel);
  double rtt = 0, gbps = 0;
  bool measured = false;
  // A degraded link (below the --min-link-gbps / --max-rtt-p99-us bar) was measured all the same:
  // its figures are what the plans must be priced with. Only a failed link has none.
  for (const LinkResult& l : links) {
    if (!l.measured || l.verdict == Verdict::kFailed) continue;
    const double slower = std::min(l.gbps_ab, l.gbps_ba);
    gbps = measured ? std::min(gbps, slower) : slower;
    rtt = std::max(rtt, l.rtt_us_p50);
    measured = true;
  }
  if (!measured || gbps <= 0) {
    p.error = "no link was measured";
    return p;
  }
  p.rtt_us = rtt;
  p.link_gbps = gbps;
  try {
    const auto file = model::GgufFile::open(t.plan_model);
    const model::ModelConfig config = model::readModelConfig(file->metadata());
    node::Options o = t.node;
    o.parallel = p.parallel;
    node::SplitClusterFigures c = node::declaredClusterFigures(o, nodes, /*gpu_ranks=*/false);
    c.rtt_us = rtt;
    c.link_bytes_per_s = gbps * 1e9;
    // This host's ranks stand for every node's (tpnode measures each node at startup).
    const node::RankRates rates = node::nodeRankRates(o, config, file->metadata(), false);
    node::applyRankRates(c, {rates});
    const bool flags = o.split_rank_read_gbps > 0 || o.split_rank_gmacs > 0;
    c.rank_rates_source = !rates.known() ? std::string("declared")
                          : flags        ? std::string("--split-rank-read / --split-rank-macs")
                                         : std::string("measured on node 0, for every node");
    p.rank_read_gbps = c.rank_read_bytes_per_s * 1e-9;
    p.rank_gmacs = c.rank_macs_per_s * 1e-9;
    p.rank_rates_source = c.rank_rates_source;
    const auto plans = node::predictPlans(o, config, file->metadata(), c, {});
    const int chosen = node::chooseSplit(plans);
    for (size_t i = 0; i < plans.size(); ++i) {
      const node::SplitPrediction& s = plans[i];
      p.candidates.push_back({s.name(), s.stages, s.nodes_per_stage, s.layers,
                              s.batch1.tokens_per_s, s.batch1.step_ms, s.batch.tokens_per_s,
                              s.refused, static_cast<int>(i) == chosen});
      if (static_cast<int>(i) == chosen) p.chosen = s.name();
    }
  } catch (const Error& e) {
    p.error = e.what();
    p.candidates.clear();
  }
  return p;
}

}  // namespace tpnode::tptopo
