// The `plan` part of the report (--plan-model): the plans `--split auto` compares for that model
// on the links tptopo measured (node/split_choice.h, node/split_plan.h), and the one it would
// choose. Node 0 of a cluster only; the figures are the slowest link's median round trip and
// the slowest direction of any link; the compute figures of a rank are measured on node 0's host
// as tpnode measures each node at startup (node/split_rates.h, --tp ranks of --threads threads,
// about 0.15 s), or --split-rank-read / --split-rank-macs. Memory is not checked here (tpnode
// checks it at startup).
#pragma once

#include <vector>

#include "tools/tptopo/report.h"
#include "tools/tptopo/topo_options.h"

namespace tpnode::tptopo {

// Never throws: a model that cannot be read, or links without figures, give ran = true with
// `error` set and no candidates.
PlanInfo planReport(const TopoOptions& options, int nodes, const std::vector<LinkResult>& links);

}  // namespace tpnode::tptopo
