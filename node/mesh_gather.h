// Small node-0-centred exchanges over a formed mesh, shared by the mesh smoke test
// (node/mesh_mode.cc) and tools/tptopo: gather one message from every node on node 0, and the
// coordinated exit that keeps a node's departure from looking like a fault to the others.
//
// Contract
// - Both are collective: every node of the mesh calls them in the same order with the same tags
//   (tags >= mesh::kFirstUserTag and not used by anything else meanwhile).
// - A peer that is lost (or lost while waiting) does not make them throw: gatherOnNode0 records
//   it in the result, coordinatedExit skips it. They block on a live peer only as long as that
//   peer takes to reach the same call.
// - Received bytes are hostile: a message longer than `max_bytes` fails that peer's entry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "mesh/mesh.h"

namespace tpnode::node {

struct Gathered {
  bool ok = false;
  std::vector<std::byte> bytes;  // the node's message when ok
  std::string error;             // why not, when !ok
};

// Node 0: returns one entry per node (its own `own` at index 0). Other nodes send `own` to
// node 0 and return an empty vector (a send to a lost node 0 is logged, not thrown).
std::vector<Gathered> gatherOnNode0(mesh::Mesh& mesh, uint32_t tag, std::span<const std::byte> own,
                                    size_t max_bytes);

// Every node tells node 0 it is done (tag_done); node 0 then tells everyone to leave (tag_bye).
// False when a peer it needed was lost (logged).
bool coordinatedExit(mesh::Mesh& mesh, uint32_t tag_done, uint32_t tag_bye);

}  // namespace tpnode::node
