// checkNccl for CUDA builds without NCCL (see gpu_internal.h).
#include "tools/tptopo/gpu_internal.h"

namespace tpnode::tptopo::gpu {

std::string ncclVersion() {
  return "none";
}

void checkNccl(const TopoOptions&, HostReport& host) {
  host.checks.push_back({"gpu.nccl", "node " + std::to_string(host.node), Verdict::kSkipped,
                         "this tptopo was built without NCCL"});
}

}  // namespace tpnode::tptopo::gpu
