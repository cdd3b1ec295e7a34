// runGpuChecks for builds without CUDA (see gpu_checks.h).
#include "tools/tptopo/gpu_checks.h"

namespace tpnode::tptopo {

void runGpuChecks(const TopoOptions& options, HostReport& host) {
  host.cuda.built = false;
  host.cuda.available = false;
  host.cuda.reason = options.skip_gpu ? "--skip-gpu"
                                      : "this tptopo was built without CUDA (TPNODE_CUDA=OFF or "
                                        "no CUDA toolkit at configure time)";
  host.checks.push_back({"gpu.devices", "node " + std::to_string(host.node), Verdict::kSkipped,
                         "no CUDA device: " + host.cuda.reason});
}

}  // namespace tpnode::tptopo
