// The link checks of a formed mesh: round trips of every link (mesh::Mesh::linkStats, the same
// measurement tpnode's mesh smoke test prints) and the bandwidth of every link in both
// directions.
//
// Contract
// - Collective: every node calls measureLinks() with the same options. Pairs (a, b), a < b,
//   are walked in lexicographic order on every node (deadlock-free); the lower node of a pair
//   drives and times, the higher one follows.
// - A lost peer fails its own links only ("failed" with the mesh's reason, within the
//   liveness timeout); the other links are still measured. Never hangs on a dead or stopped
//   peer: the mesh's liveness fails the link.
// - Tags: kTagBandwidth only (plus the mesh's own ping tag).
#pragma once

#include <cstdint>
#include <vector>

#include "mesh/mesh.h"
#include "mesh/tags.h"
#include "tools/tptopo/report.h"
#include "tools/tptopo/topo_options.h"

namespace tpnode::tptopo {

inline constexpr uint32_t kTagBandwidth = mesh::kTptopoTags.at(0);  // its range: mesh/tags.h

// One entry per peer of this node (a = min(this, peer), b = max).
std::vector<LinkResult> measureLinks(mesh::Mesh& mesh, const TopoOptions& options);

}  // namespace tpnode::tptopo
