// Re-forming a cluster whose stages `--split auto` chose at startup (node/split_choice.h): every
// formation after the first begins with the split probe's exchange again (node/split_probe.h,
// the same probe mesh and fingerprint as at startup), in which node 0 sends the stages it runs
// instead of choosing anew. So a node restarted with its original command line, whose startup
// probe meets node 0's re-formation, adopts node 0's stages, and the nodes that stayed check
// that they still agree with node 0 (a restarted node 0 chooses again).
//
// Contract
// - Collective, like chooseStagesAtFormation(): node 0 calls agreeOnChosenStages() at the start
//   of every formation but its first, every worker at the start of every formation but its
//   first, when options.pp_chosen (the stages came from the startup choice).
// - Returns node 0's stages. A worker whose loaded stages (options.pp) differ throws
//   Error(kMismatch) naming both (it must be restarted to load the other stages). Errors of the
//   probe: node/split_probe.h (a node missing past the timeout, *cancel turning true).
#pragma once

#include <atomic>
#include <chrono>
#include <optional>

#include "node/loaded_model.h"
#include "node/options.h"

namespace tpnode::node {

int agreeOnChosenStages(const Options& options, const LoadedModel& model,
                        const std::atomic<bool>* cancel,
                        std::optional<std::chrono::milliseconds> connect_timeout);

}  // namespace tpnode::node
