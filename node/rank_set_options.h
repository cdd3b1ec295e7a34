// The RankSet options of this node (threads, KV slots and positions, CPU pinning, GPU devices
// and transports, CUDA graphs) from its Options and placement: built here once, for node 0's
// Driver (cluster_mode.cc) and for the workers (worker.cc) alike, so that every node loads its
// ranks the same way.
//
// Contract: a pure function, any thread.
#pragma once

#include "node/options.h"
#include "node/placement.h"
#include "node/rank_set.h"

namespace tpnode::node {

RankSetOptions rankSetOptions(const Options& o, const Placement& placement);

}  // namespace tpnode::node
