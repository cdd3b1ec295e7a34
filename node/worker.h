// Worker: every node but node 0. It joins the mesh, loads its local ranks' shards and then runs
// whatever StepCommand the driver sends, until kShutdown (exit 0). It never samples.
//
// Faults: if another worker is lost, the worker waits for the driver's kReset and re-forms the
// cluster with it. If the driver (node 0) is lost, the worker exits non-zero with a message
// naming it (the cluster cannot go on without its driver).
#pragma once

#include "node/loaded_model.h"
#include "node/options.h"
#include "node/placement.h"

namespace tpnode::node {

// Returns the process exit code.
int runWorker(const Options& options, const LoadedModel& model, const Placement& placement);

}  // namespace tpnode::node
