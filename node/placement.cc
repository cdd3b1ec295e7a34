#include "node/placement.h"

#include <pthread.h>
#include <sched.h>

#include <filesystem>
#include <thread>

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "collectives/topology.h"
#include "common/error.h"
#include "model/cuda/gpu_node.h"

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

// "0,1,0": a device list as --devices takes it.
std::string deviceList(const std::vector<int>& devices) {
  return fmt::format("{}", fmt::join(devices, ","));
}

}  // namespace

Placement resolvePlacement(const Options& o) {
  Placement p;
  p.gpus_present = countNvidiaGpus();
  // --backend, --local-transport and --inter-transport are enums: checked when parsed (for every
  // backend, so that a typo never waits for a GPU host).
  std::string why;
  const int visible = o.backend == Backend::kCpu ? 0 : model::visibleCudaDevices(&why);
  if (o.backend == Backend::kCuda || (o.backend == Backend::kAuto && visible > 0)) {
    if (visible == 0) {
      fail(ErrorCode::kResource,
           "--backend cuda: no CUDA device is usable: {} ({} NVIDIA GPU(s) listed by the driver "
           "in /proc/driver/nvidia/gpus). Use --backend cpu",
           why, p.gpus_present);
    }
    p.gpu = true;
    if (o.devices.empty()) {
      if (o.tp > visible) {
        fail(ErrorCode::kResource,
             "--tp {} needs {} CUDA devices but {} {} visible; lower --tp, add nodes, or put "
             "several ranks on one GPU on purpose with --devices (e.g. --devices {})",
             o.tp, o.tp, visible, visible == 1 ? "is" : "are",
             deviceList(collectives::Topology::roundRobinDevices(o.tp, visible)));
      }
      p.gpu_of_rank =
          collectives::Topology::roundRobinDevices(o.tp, visible);  // tp <= visible: r on r
    } else {
      p.gpu_of_rank = parseIntList("--devices", o.devices);
      if (static_cast<int>(p.gpu_of_rank.size()) != o.tp) {
        fail(ErrorCode::kInvalidArgument,
             "--devices '{}' lists {} device(s) but --tp is {}; give one per local rank", o.devices,
             p.gpu_of_rank.size(), o.tp);
      }
      for (int d : p.gpu_of_rank) {
        if (d < 0 || d >= visible) {
          fail(ErrorCode::kResource,
               "--devices '{}': CUDA device {} does not exist ({} visible: 0..{}); check "
               "CUDA_VISIBLE_DEVICES",
               o.devices, d, visible, visible - 1);
        }
      }
    }
    spdlog::info("[node] GPU ranks: {} local rank(s) on CUDA device(s) {} ({} visible)", o.tp,
                 deviceList(p.gpu_of_rank), visible);
    return p;
  }
  if (p.gpus_present > 0) {
    spdlog::warn(
        "[node] this host has {} NVIDIA GPU(s) but runs CPU ranks ({}): the {} local "
        "rank(s) use the CPU",
        p.gpus_present, o.backend == Backend::kCpu ? "--backend cpu" : why, o.tp);
  }
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (o.devices.empty() && o.tp > cores) {
    fail(ErrorCode::kInvalidArgument,
         "--tp {} but this host has {} CPU core(s) for CPU ranks; lower --tp to at most {}, add "
         "nodes, or oversubscribe on purpose by mapping ranks to cores with --devices (e.g. "
         "--devices {})",
         o.tp, cores, cores, deviceList(collectives::Topology::roundRobinDevices(o.tp, cores)));
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
