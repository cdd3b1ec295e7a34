// Worker: every node but node 0. It joins the mesh, loads its local ranks' shards and then runs
// whatever StepCommand the driver sends, until kShutdown (exit 0). It never samples.
//
// Faults: if another worker is lost, the worker waits for the driver's kReset and re-forms the
// cluster with it. If the driver (node 0) is lost (it died, or declared this node lost: e.g.
// this process was paused past the liveness timeout, or a step did not finish within the
// driver's --step-timeout), the worker tries to rejoin it for --rejoin-timeout seconds, then
// exits 3 with a message naming it (the cluster cannot go on without its driver). Under
// --split auto, node 0 tells the stages again at every re-formation (node/stage_rejoin.h): when
// a restarted node 0 chose other stages, the worker loads those before it rejoins; when they do
// not load (its memory, its model file), it exits 3 naming them and why.
//
// Test-only fault injection: TPNODE_TEST_STALL_AT_STEP=N makes the worker, at the N-th step
// command it receives (counted from 1 over the whole process), stop answering while its mesh
// stays alive (heartbeats go on) until the driver drops it; then it goes on as after any
// fault. It exists for the tests of --step-timeout; never set it in production.
#pragma once

#include "node/loaded_model.h"
#include "node/options.h"
#include "node/placement.h"

namespace tpnode::node {

// Returns the process exit code.
int runWorker(const Options& options, const LoadedModel& model, const Placement& placement);

}  // namespace tpnode::node
