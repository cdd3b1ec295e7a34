// Host staging bandwidth: pinned host memory <-> each device, both directions.
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "tools/tptopo/gpu_internal.h"

namespace tpnode::tptopo::gpu {

void checkStaging(const TopoOptions& o, HostReport& host) {
  const size_t bytes = static_cast<size_t>(o.gpu_mib) << 20;
  PinnedBuffer pinned(bytes);
  std::memset(pinned.get(), 0x5a, bytes);
  for (const GpuDevice& dev : host.cuda.devices) {
    spdlog::info("[tptopo] staging bandwidth, device {}", dev.index);
    StagingBandwidth s;
    s.device = dev.index;
    const std::string scope = fmt::format("node {} gpu {}", host.node, dev.index);
    try {
      DeviceBuffer buf(dev.index, bytes);
      Stream stream(dev.index);  // also makes dev.index current, for the events
      double h2d = medianUs(stream.get(), 5, [&] {
        check(cudaMemcpyAsync(buf.get(), pinned.get(), bytes, cudaMemcpyHostToDevice, stream.get()),
              "cudaMemcpyAsync H2D");
      });
      double d2h = medianUs(stream.get(), 5, [&] {
        check(cudaMemcpyAsync(pinned.get(), buf.get(), bytes, cudaMemcpyDeviceToHost, stream.get()),
              "cudaMemcpyAsync D2H");
      });
      s.h2d_gbps = h2d > 0 ? static_cast<double>(bytes) / h2d / 1e3 : 0;
      s.d2h_gbps = d2h > 0 ? static_cast<double>(bytes) / d2h / 1e3 : 0;
      host.checks.push_back({"gpu.staging", scope, Verdict::kOk,
                             fmt::format("pinned host->device {:.1f} GB/s, device->host {:.1f} "
                                         "GB/s ({} MiB)",
                                         s.h2d_gbps, s.d2h_gbps, o.gpu_mib)});
    } catch (const CudaFailure& f) {
      host.checks.push_back({"gpu.staging", scope, Verdict::kFailed, f.what});
    }
    host.cuda.staging.push_back(s);
  }
}

}  // namespace tpnode::tptopo::gpu
