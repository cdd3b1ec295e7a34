#include "tools/tptopo/cpu_checks.h"

#include <sched.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/error.h"
#include "model/kernels/cpu/dot.h"
#include "node/placement.h"
#include "tools/mem_bandwidth.h"

namespace tpnode::tptopo {
namespace {

constexpr size_t kMaxMemBytes = size_t{4} << 30;

std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
    }
  }
  return "unknown";
}

int numaNodes() {
  std::error_code ec;
  std::filesystem::directory_iterator it("/sys/devices/system/node", ec);
  if (ec) return 1;
  static const std::regex kNode("node[0-9]+");
  int n = 0;
  for (const auto& entry : it) {
    if (std::regex_match(entry.path().filename().string(), kNode)) ++n;
  }
  return std::max(n, 1);
}

int allowedCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  return CPU_COUNT(&set);
}

void placementCheck(const TopoOptions& t, HostReport& host) {
  const std::string scope = "node " + std::to_string(host.node);
  try {
    node::Placement p = node::resolvePlacement(t.node);
    std::string detail;
    if (p.gpu) {
      std::string devices;
      for (int d : p.gpu_of_rank) devices += (devices.empty() ? "" : ",") + std::to_string(d);
      detail = fmt::format("--tp {}: GPU ranks on CUDA device(s) {}", t.node.tp, devices);
    } else {
      detail = fmt::format("--tp {}: CPU ranks on {} core(s)", t.node.tp, host.cpu.cores);
      if (!p.cpu_of_rank.empty()) detail += ", ranks pinned to CPUs " + t.node.devices;
      if (p.gpus_present > 0) {
        detail += fmt::format("; {} NVIDIA GPU(s) present but not used (--backend {})",
                              p.gpus_present, node::enumName(t.node.backend));
      }
    }
    host.checks.push_back({"placement", scope, Verdict::kOk, detail});
  } catch (const Error& e) {
    host.checks.push_back({"placement", scope, Verdict::kFailed, e.what()});
  }
}

}  // namespace

void runCpuChecks(const TopoOptions& t, HostReport& host) {
  const std::string scope = "node " + std::to_string(host.node);
  CpuInfo& cpu = host.cpu;
  cpu.model = cpuModel();
  cpu.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cpu.allowed_cores = allowedCores();
  cpu.numa_nodes = numaNodes();
  host.checks.push_back({"cpu.cores", scope, Verdict::kOk,
                         fmt::format("{}: {} core(s), {} in this process's affinity, {} NUMA "
                                     "node(s)",
                                     cpu.model, cpu.cores, cpu.allowed_cores, cpu.numa_nodes)});

  cpu.simd = std::string(model::kernels::bestKernels().isa);
  if (cpu.simd == "scalar") {
    host.checks.push_back({"cpu.simd", scope, Verdict::kDegraded,
                           "the CPU kernels run scalar code (no AVX2+FMA): expect slow CPU ranks"});
  } else {
    host.checks.push_back({"cpu.simd", scope, Verdict::kOk, "CPU kernels use " + cpu.simd});
  }

  const int threads = std::max(1, cpu.allowed_cores);
  // Two buffers per thread; at most kMaxMemBytes in all, however many cores.
  const size_t per_thread = std::min(static_cast<size_t>(t.mem_mib) << 20,
                                     kMaxMemBytes / 2 / static_cast<size_t>(threads));
  spdlog::info("[tptopo] measuring memory bandwidth: {} thread(s) x {} MiB, best of {}", threads,
               per_thread >> 20, t.mem_reps);
  auto bw = tools::measureMemBandwidth(per_thread, threads, t.mem_reps);
  cpu.mem_copy_gbps = bw.copy_gbps;
  cpu.mem_read_gbps = bw.read_gbps;
  host.checks.push_back({"cpu.memory", scope, Verdict::kOk,
                         fmt::format("copy {:.2f} GB/s, read {:.2f} GB/s ({} thread(s))",
                                     bw.copy_gbps, bw.read_gbps, threads)});
  placementCheck(t, host);
}

}  // namespace tpnode::tptopo
