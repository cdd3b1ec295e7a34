// The modes a tpnode process can run in; main() picks one from the options.
// Each returns the process exit code. Errors propagate as tpnode::Error.
#pragma once

#include "node/options.h"

namespace tpnode::node {

// --node-id/--peers without --model: form the mesh, print the link table on node 0, exit 0.
int runMeshOnly(const Options& options);

// --model without --peers: one process, --tp local ranks, --prompt generation.
int runLocal(const Options& options);

// --model with --peers (or a config), or --model without --prompt: node 0 drives (and
// serves), the other nodes work. See node/driver.h and node/worker.h.
int runCluster(const Options& options);

}  // namespace tpnode::node
