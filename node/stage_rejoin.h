// Re-forming a cluster whose stages `--split auto` chose at startup (node/split_choice.h): every
// formation after the first begins with the split probe's exchange again (node/split_probe.h,
// the same probe mesh and fingerprint as at startup), in which node 0 sends the stages it runs
// instead of choosing anew. So a node restarted with its original command line, whose startup
// probe meets node 0's re-formation, adopts node 0's stages; and a restarted node 0 chooses
// again at its startup, which the nodes that stayed meet here: they are told its choice. Node
// 0's stages are the only ones the cluster then runs (a node never joins with others).
//
// Contract
// - Collective, like chooseStagesAtFormation(): node 0 calls agreeOnChosenStages() at the start
//   of every formation but its first, every worker at the start of every formation but its
//   first, when options.pp_chosen (the stages came from the startup choice).
// - Returns node 0's stages, which may differ from this worker's loaded ones (options.pp) when
//   node 0 was restarted: `adopt` (node/split_probe.h) then runs with node 0's stages inside the
//   exchange, where the worker loads them (node/worker.cc: loadChosenStages()), so that node 0
//   learns why a worker cannot; for stages equal to options.pp it is not called (they are
//   loaded). Nothing is measured again: a worker reports its --split-rank-read /
//   --split-rank-macs figures (0, unknown, where not given) to a node 0 that chooses anew.
//   Errors of the probe: node/split_probe.h (a node missing past the timeout, *cancel turning
//   true, a node that cannot run the stages: node 0's error names it and its reason).
#pragma once

#include <atomic>
#include <chrono>
#include <optional>

#include "node/loaded_model.h"
#include "node/options.h"
#include "node/split_probe.h"

namespace tpnode::node {

int agreeOnChosenStages(const Options& options, const LoadedModel& model,
                        const std::atomic<bool>* cancel,
                        std::optional<std::chrono::milliseconds> connect_timeout,
                        const AdoptStages& adopt);

}  // namespace tpnode::node
