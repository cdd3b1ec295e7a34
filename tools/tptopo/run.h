// One tptopo run: the local checks, and with --peers (or a --config listing several nodes)
// the mesh, link and all-reduce checks, gathered on node 0.
//
// Contract
// - Every node of a cluster runs runTopo() with the same cluster flags; the mesh is joined like
//   tpnode joins it (node::makeMeshOptions: peers, secret, TLS, timeouts) with the extra
//   fingerprint item "tool=tptopo", so tptopo and tpnode processes never join each other.
// - Never throws for what it checks: a mesh that does not form, a lost peer or a wrong result
//   is a failed check in the report. Throws Error(kInvalidArgument) for bad TPNODE_COLL_*
//   settings, like tpnode.
// - Node 0 returns the cluster report; other nodes return their own part (mode
//   "cluster-member").
#pragma once

#include "tools/tptopo/report.h"
#include "tools/tptopo/topo_options.h"

namespace tpnode::tptopo {

Report runTopo(const TopoOptions& options);

}  // namespace tpnode::tptopo
