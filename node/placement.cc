#include "node/placement.h"

#include <pthread.h>
#include <sched.h>

#include <filesystem>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/error.h"

namespace tpnode::node {
namespace {

int countNvidiaGpus() {
  std::error_code ec;
  std::filesystem::directory_iterator it("/proc/driver/nvidia/gpus", ec);
  if (ec) return 0;
  int n = 0;
  for (const auto& entry : it) n += entry.is_directory() ? 1 : 0;
  return n;
}

}  // namespace

Placement resolvePlacement(const Options& o) {
  Placement p;
  p.gpus_present = countNvidiaGpus();
  if (o.backend != "auto" && o.backend != "cpu" && o.backend != "cuda") {
    fail(ErrorCode::kInvalidArgument, "--backend '{}' is not auto, cpu or cuda", o.backend);
  }
  if (o.backend == "cuda") {
    fail(ErrorCode::kUnsupported,
         "--backend cuda: this build runs CPU ranks only (GPU ranks are not implemented yet); "
         "{} NVIDIA GPU(s) found on this host. Use --backend cpu (or auto)",
         p.gpus_present);
  }
  if (p.gpus_present > 0) {
    spdlog::warn(
        "[node] this host has {} NVIDIA GPU(s), but this build runs CPU ranks: the "
        "{} local rank(s) use the CPU",
        p.gpus_present, o.tp);
  }
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (o.devices.empty() && o.tp > cores) {
    fail(ErrorCode::kInvalidArgument,
         "--tp {} but this host has {} CPU core(s) for CPU ranks; lower --tp to at most {}, add "
         "nodes, or oversubscribe on purpose by mapping ranks to cores with --devices (e.g. "
         "--devices {})",
         o.tp, cores, cores, [&] {
           std::string d;
           for (int r = 0; r < o.tp; ++r) d += (r ? "," : "") + std::to_string(r % cores);
           return d;
         }());
  }
  if (!o.devices.empty()) {
    std::vector<int> cpus = parseIntList("--devices", o.devices);
    if (static_cast<int>(cpus.size()) != o.tp) {
      fail(ErrorCode::kInvalidArgument,
           "--devices '{}' lists {} device(s) but --tp is {}; give one per local rank", o.devices,
           cpus.size(), o.tp);
    }
    for (int c : cpus) {
      if (c >= cores) {
        fail(ErrorCode::kInvalidArgument,
             "--devices '{}': CPU {} does not exist (this host has CPUs 0..{}); CPU ranks are "
             "pinned to the listed cores",
             o.devices, c, cores - 1);
      }
    }
    p.cpu_of_rank = cpus;
  }
  return p;
}

void pinThisThread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  if (rc != 0) spdlog::warn("[node] could not pin a rank thread to CPU {} (error {})", cpu, rc);
}

}  // namespace tpnode::node
