// Placement: where each local rank runs. --backend cuda (or auto with a visible CUDA device in a
// CUDA build) gives GPU ranks: --devices (env TPNODE_TP_DEVICES) names the CUDA device of each
// local rank (default: rank r on device r; a device may repeat to put several ranks on one
// GPU). CPU ranks: --devices names the CPU core each local rank's thread is pinned to.
#pragma once

#include <vector>

#include "node/options.h"

namespace tpnode::node {

struct Placement {
  bool gpu = false;              // GPU ranks (CudaRank), else CPU ranks
  std::vector<int> gpu_of_rank;  // CUDA device of each local rank (gpu only)
  std::vector<int> cpu_of_rank;  // empty: no pinning
  int gpus_present = 0;          // NVIDIA GPUs seen by the driver (/proc/driver/nvidia/gpus)
};

// Throws Error(kInvalidArgument) naming the flag, the value and the fix.
Placement resolvePlacement(const Options& options);

// Pins the calling thread to `cpu` (best effort: logs and goes on if the OS refuses).
void pinThisThread(int cpu);

}  // namespace tpnode::node
