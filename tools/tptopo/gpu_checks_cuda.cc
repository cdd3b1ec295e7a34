// runGpuChecks for CUDA builds (see gpu_checks.h): versions and device count here, each area
// in its own file.
#include <spdlog/spdlog.h>

#include "tools/tptopo/gpu_checks.h"
#include "tools/tptopo/gpu_internal.h"

namespace tpnode::tptopo {
namespace {

std::string cudaVersionText(int v) {
  return v <= 0 ? "none" : std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

// Runs one area; a CudaFailure becomes a failed check named `name`.
template <typename F>
void guarded(HostReport& host, const char* name, F&& body) {
  try {
    body();
  } catch (const gpu::CudaFailure& f) {
    host.checks.push_back({name, "node " + std::to_string(host.node), Verdict::kFailed, f.what});
  }
}

}  // namespace

void runGpuChecks(const TopoOptions& options, HostReport& host) {
  CudaInfo& cuda = host.cuda;
  const std::string scope = "node " + std::to_string(host.node);
  cuda.built = true;
  if (options.skip_gpu) {
    cuda.reason = "--skip-gpu";
    host.checks.push_back({"gpu.devices", scope, Verdict::kSkipped, "no CUDA device: --skip-gpu"});
    return;
  }
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  cuda.driver_version = cudaVersionText(driver);
  cuda.runtime_version = cudaVersionText(runtime);
  cuda.nccl_version = gpu::ncclVersion();
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    cuda.reason = err != cudaSuccess ? gpu::describe(err) : "the driver reports 0 devices";
    cudaGetLastError();  // clear the sticky error
    host.checks.push_back(
        {"gpu.devices", scope, Verdict::kSkipped, "no CUDA device: " + cuda.reason});
    spdlog::info("[tptopo] no CUDA device: {}", cuda.reason);
    return;
  }
  spdlog::info("[tptopo] {} CUDA device(s); driver {}, runtime {}, NCCL {}", count,
               cuda.driver_version, cuda.runtime_version, cuda.nccl_version);
  guarded(host, "gpu.devices", [&] { gpu::listDevices(host); });
  if (cuda.devices.empty()) {
    cuda.reason = "no device could be queried";
    return;
  }
  cuda.available = true;
  guarded(host, "gpu.p2p", [&] { gpu::checkP2p(options, host); });
  guarded(host, "gpu.staging", [&] { gpu::checkStaging(options, host); });
  guarded(host, "gpu.nccl", [&] { gpu::checkNccl(options, host); });
}

}  // namespace tpnode::tptopo
