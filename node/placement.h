// Placement: where each local rank runs. This build runs CPU ranks; --devices (env
// TPNODE_TP_DEVICES) then names the CPU core each local rank's thread is pinned to. GPU ranks
// (--backend cuda) are refused with a message saying what was found.
#pragma once

#include <vector>

#include "node/options.h"

namespace tpnode::node {

struct Placement {
  std::vector<int> cpu_of_rank;  // empty: no pinning
  int gpus_present = 0;          // NVIDIA GPUs seen by the driver (/proc/driver/nvidia/gpus)
};

// Throws Error(kInvalidArgument) naming the flag, the value and the fix.
Placement resolvePlacement(const Options& options);

// Pins the calling thread to `cpu` (best effort: logs and goes on if the OS refuses).
void pinThisThread(int cpu);

}  // namespace tpnode::node
