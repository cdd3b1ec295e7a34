// The cluster all-reduce check: the runtime's own hierarchical all-reduce
// (collectives::NodeGroup: local CPU group x nodes over the mesh) with --tp local ranks per
// node, checked with known values at sizes that take each path the collectives choose (leader
// or sliced; direct or ring), then timed at two sizes.
//
// Contract
// - Collective over the mesh (every node calls it with the same options and `layout`, whose
//   entry for this node is its --tp); `mesh` may be null for one node. A layout tpnode refuses
//   (collectives::Layout::refusal) is not run: skipped, with the reason. It installs the mesh's
//   event callback (NodeGroup does) for its duration.
// - Never throws for what it measures: a lost peer, an abort or a wrong value gives verdict
//   "failed" with the reason; a lost peer is noticed within the liveness timeout.
// - Rank r's thread is pinned to CPU cpu_of_rank[r] when given (node::pinThisThread).
#pragma once

#include <vector>

#include "collectives/layout.h"
#include "collectives/options.h"
#include "mesh/mesh.h"
#include "tools/tptopo/report.h"
#include "tools/tptopo/topo_options.h"

namespace tpnode::tptopo {

AllReduceResult runAllReduceCheck(mesh::Mesh* mesh, const TopoOptions& options,
                                  const collectives::Layout& layout,
                                  const collectives::CollectiveOptions& coll,
                                  const std::vector<int>& cpu_of_rank);

}  // namespace tpnode::tptopo
