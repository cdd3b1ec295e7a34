// The device listing: name, memory, PCI bus id and compute capability of every device.
#include <fmt/format.h>

#include "tools/tptopo/gpu_internal.h"

namespace tpnode::tptopo::gpu {

void listDevices(HostReport& host) {
  int count = 0;
  check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  std::string names;
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, d), "cudaGetDeviceProperties");
    GpuDevice dev;
    dev.index = d;
    dev.name = prop.name;
    dev.memory_bytes = prop.totalGlobalMem;
    char bus[32] = {};
    check(cudaDeviceGetPCIBusId(bus, sizeof bus, d), "cudaDeviceGetPCIBusId");
    dev.pci_bus_id = bus;
    dev.compute_capability = fmt::format("{}.{}", prop.major, prop.minor);
    names += fmt::format("{}{}: {} ({:.1f} GiB, sm {}, {})", d ? "; " : "", d, dev.name,
                         static_cast<double>(dev.memory_bytes) / (1 << 30), dev.compute_capability,
                         dev.pci_bus_id);
    host.cuda.devices.push_back(std::move(dev));
  }
  host.checks.push_back({"gpu.devices", "node " + std::to_string(host.node), Verdict::kOk,
                         fmt::format("{} device(s): {}; driver {}, runtime {}", count, names,
                                     host.cuda.driver_version, host.cuda.runtime_version)});
}

}  // namespace tpnode::tptopo::gpu
