// The checks Mesh::connect() starts with, for callers that want to fail before slow work
// (loading a model). Pure function; any thread.
#pragma once

#include "mesh/mesh.h"

namespace tpnode::mesh {

// Peers, node id, sockets per peer, timeouts, and security: a multi-node mesh needs a
// cluster secret of at least kMinSecretBytes, or mutual TLS, or `insecure`. Throws
// Error(kInvalidArgument) naming the problem and how to fix it.
void validateMeshOptions(const MeshOptions& options);

}  // namespace tpnode::mesh
