// DeviceGroup::create: availability, the startup self-tests (one thread per local rank), the
// measured choice, and the DeviceComm objects (device_hierarchical.cc). The ops themselves (the
// GPU transports) are the DeviceLocalOps of device_local_op.h.
#include <algorithm>
#include <array>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "collectives/cuda/cuda_resources.h"
#include "collectives/cuda/device_comm.h"
#include "collectives/cuda/device_hierarchical.h"
#include "collectives/cuda/device_verify.h"
#include "collectives/cuda/host_staging_op.h"
#include "collectives/cuda/inter_select.h"
#include "collectives/cuda/nccl_global_op.h"
#include "collectives/cuda/nccl_op.h"
#include "collectives/cuda/p2p_op.h"
#include "collectives/local_group.h"
#include "common/check.h"
#include "common/log.h"

namespace tpnode::collectives::cuda {
namespace {

constexpr std::array<Transport, 3> kOrder = {Transport::kHost, Transport::kP2p, Transport::kNccl};

class DeviceGroupImpl final : public DeviceGroup {
 public:
  DeviceGroupImpl(std::vector<std::unique_ptr<DeviceComm>> comms, TransportReport report)
      : comms_(std::move(comms)), report_(std::move(report)) {}

  std::unique_ptr<DeviceComm> communicator(int local_rank) override {
    std::lock_guard lock(mutex_);
    if (local_rank < 0 || static_cast<size_t>(local_rank) >= comms_.size()) {
      fail(ErrorCode::kInvalidArgument, "[coll] no local rank {} (group of {})", local_rank,
           comms_.size());
    }
    auto& comm = comms_[static_cast<size_t>(local_rank)];
    if (!comm) {
      fail(ErrorCode::kInvalidArgument, "[coll] communicator({}) was already taken", local_rank);
    }
    return std::move(comm);
  }
  const TransportReport& report() const override { return report_; }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<DeviceComm>> comms_;  // GUARDED_BY(mutex_)
  const TransportReport report_;
};

// Everything the self-tests share between the rank threads of create().
struct Probe {
  explicit Probe(int ranks) : barrier(ranks, std::chrono::microseconds(200)) {}
  SpinBarrier barrier;
  std::shared_ptr<LocalGroup> cpu_group;  // host-staging probes: local ranks only
  std::vector<std::unique_ptr<Communicator>> cpu_comms;
  std::shared_ptr<P2pShared> p2p;
  std::shared_ptr<NcclShared> nccl;
  // Per transport (index in kOrder), per rank: the failure ("" = passed) and median time.
  std::array<std::vector<std::string>, 3> failures;
  std::array<std::vector<double>, 3> median_us;
  std::array<bool, 3> tried{};
  std::vector<std::string> pair_failures;  // p2p pair check, per rank
  bool timing = false;
  size_t probe_count = 0;
  size_t max_count = 0;
};

size_t indexOf(Transport t) {
  for (size_t i = 0; i < kOrder.size(); ++i) {
    if (kOrder[i] == t) return i;
  }
  TP_CHECK(false, "transport {}", transportName(t));
  return 0;
}

// Reduces known values at a few counts; returns the first mismatch ("" when all matched).
// Every rank runs every count (a rank that stopped early would leave the others waiting).
std::string verifyLocal(DeviceLocalOp& op, int rank, int ranks, float* buf, size_t max_count,
                        cudaStream_t stream) {
  std::string failure;
  const ReduceFn reduce = [&](float* data, size_t n, cudaStream_t s) {
    op.allReduceSum(data, n, s);
  };
  for (size_t count : {size_t{1}, size_t{1000}, size_t{65537}}) {
    const VerifyResult result = verifyOnDevice(reduce, rank, ranks, buf, std::min(count, max_count),
                                               stream, "self-test all-reduce");
    if (!result.ok && failure.empty()) {
      failure = fmt::format("local rank {}: {}", rank, result.describe());
    }
  }
  return failure;
}

double medianMicros(DeviceLocalOp& op, float* buf, size_t count, cudaStream_t stream) {
  return medianReduceMicros(
      [&](float* data, size_t n, cudaStream_t s) { op.allReduceSum(data, n, s); }, buf, count,
      stream);
}

std::unique_ptr<DeviceLocalOp> makeProbeOp(Probe& probe, Transport t, int r, int device) {
  switch (t) {
    case Transport::kHost:
      return std::make_unique<HostStagingOp>(probe.cpu_comms[static_cast<size_t>(r)].get(), device,
                                             probe.max_count, true);
    case Transport::kP2p:
      return std::make_unique<P2pOp>(probe.p2p, r);
    case Transport::kNccl:
      return createNcclOp(probe.nccl, r);
    case Transport::kAuto:
      break;
  }
  TP_CHECK(false, "probe op for {}", transportName(t));
  return nullptr;
}

// The rank thread of the self-tests: each tried transport is verified by every rank, the
// ranks agree (barrier), and — for kAuto — the transports that passed are timed.
void probeRank(Probe& probe, const std::vector<int>& devices, int r) {
  const int device = devices[static_cast<size_t>(r)];
  const int ranks = static_cast<int>(devices.size());
  Stream stream(device);
  DeviceBuffer buf(device, probe.max_count);
  if (probe.p2p) {
    std::string joined;
    try {
      for (auto& f : p2pPairCheck(*probe.p2p, r, stream.get(), 4096)) {
        joined += (joined.empty() ? "" : "; ") + f;
      }
    } catch (const std::exception& e) {
      joined = fmt::format("local rank {}: {}", r, e.what());
      probe.p2p->barrier.abort(ErrorCode::kAborted, joined);
      (void)cudaGetLastError();
    }
    probe.pair_failures[static_cast<size_t>(r)] = joined;
  }
  for (size_t k = 0; k < kOrder.size(); ++k) {
    if (!probe.tried[k]) continue;
    auto& failure = probe.failures[k][static_cast<size_t>(r)];
    probe.barrier.arriveAndWait();  // the pair check's results are visible to everyone
    if (kOrder[k] == Transport::kP2p) {
      std::string pairs;
      for (auto& f : probe.pair_failures) {
        if (!f.empty()) pairs += (pairs.empty() ? "" : "; ") + f;
      }
      if (!pairs.empty()) {  // same decision on every rank; only rank 0 writes the reason
        if (r == 0) failure = pairs;
        continue;
      }
    }
    auto op = makeProbeOp(probe, kOrder[k], r, device);
    try {
      failure = verifyLocal(*op, r, ranks, buf.get(), probe.max_count, stream.get());
    } catch (const std::exception& e) {
      failure = fmt::format("local rank {}: {}", r, e.what());
      op->abort(e.what());  // p2p: releases the barrier; nccl: marks it broken
      if (kOrder[k] == Transport::kHost) {
        probe.cpu_group->abort(ErrorCode::kAborted, failure);  // host staging is not used again
      }
      (void)cudaGetLastError();
    }
    probe.barrier.arriveAndWait();
    bool passed = true;
    for (auto& f : probe.failures[k]) passed = passed && f.empty();
    if (passed && probe.timing) {
      probe.median_us[k][static_cast<size_t>(r)] =
          medianMicros(*op, buf.get(), probe.probe_count, stream.get());
    }
  }
  probe.barrier.arriveAndWait();
}

std::string availability(Transport t, const std::vector<int>& devices) {
  switch (t) {
    case Transport::kNccl:
      return ncclUnavailable(devices);
    case Transport::kP2p:
      return prepareP2p(devices);
    default:
      return {};
  }
}

std::string formatBytes(size_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= 1024 && bytes % 1024 == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

// Picks the transport from the probe's results; fills the report.
Transport choose(Probe& probe, Transport requested, TransportReport& report) {
  std::vector<std::pair<double, Transport>> timed;
  for (size_t k = 0; k < kOrder.size(); ++k) {
    if (!probe.tried[k]) continue;
    std::string joined;
    for (auto& f : probe.failures[k]) {
      if (!f.empty()) joined += (joined.empty() ? "" : "; ") + f;
    }
    if (!joined.empty()) {
      report.demoted.push_back(fmt::format("{}: {}", transportName(kOrder[k]), joined));
      spdlog::warn("[coll] device all-reduce: {} failed its self-test, demoted: {}",
                   transportName(kOrder[k]), joined);
      if (requested == kOrder[k]) {
        fail(ErrorCode::kUnsupported, "[coll] {} transport failed its self-test: {}",
             transportName(requested), joined);
      }
      continue;
    }
    double worst = 0.0;
    for (double us : probe.median_us[k]) worst = std::max(worst, us);
    timed.emplace_back(worst, kOrder[k]);
  }
  if (requested != Transport::kAuto) {
    report.chosen = requested;
    report.reason = "forced";
    return requested;
  }
  TP_CHECK(!timed.empty(), "no device transport passed (host staging always runs)");
  std::stable_sort(timed.begin(), timed.end());
  report.chosen = timed.front().second;
  report.reason = timed.size() == 1 ? "the only transport that passed; " : "measured fastest: ";
  for (size_t i = 0; i < timed.size(); ++i) {
    report.reason += fmt::format("{}{} {:.1f} us", i ? ", " : "", transportName(timed[i].second),
                                 timed[i].first);
  }
  report.reason += fmt::format(" ({})", formatBytes(probe.probe_count * sizeof(float)));
  return report.chosen;
}

// The final objects, one per local rank.
std::vector<std::unique_ptr<DeviceComm>> buildComms(Probe& probe, Transport chosen,
                                                    const std::vector<Communicator*>& host_comms,
                                                    const std::vector<int>& devices,
                                                    bool multi_node) {
  std::vector<std::unique_ptr<DeviceComm>> comms;
  for (size_t r = 0; r < devices.size(); ++r) {
    const int device = devices[r];
    std::unique_ptr<DeviceLocalOp> local, inter;
    if (chosen == Transport::kHost) {
      local = std::make_unique<HostStagingOp>(host_comms[r], device, probe.max_count, true);
    } else {
      local = chosen == Transport::kP2p ? std::make_unique<P2pOp>(probe.p2p, static_cast<int>(r))
                                        : createNcclOp(probe.nccl, static_cast<int>(r));
      if (multi_node) {
        inter = std::make_unique<HostStagingOp>(host_comms[r], device, probe.max_count, r == 0);
      }
    }
    comms.push_back(makeDeviceHierarchical(host_comms[r]->rank(), host_comms[r]->size(), chosen,
                                           probe.max_count, std::move(local), std::move(inter)));
  }
  return comms;
}

// One all-reduce of known values through the full path (inter-node op included) on every
// rank; every node does exactly one, whatever it chose, so the host collectives line up.
void verifyFullPath(std::vector<std::unique_ptr<DeviceComm>>& comms,
                    const std::vector<int>& devices, size_t max_count) {
  runLocalRanks(
      devices,
      [&](int r) {
        DeviceComm& comm = *comms[static_cast<size_t>(r)];
        const int device = devices[static_cast<size_t>(r)];
        const size_t count = std::min<size_t>(max_count, 4099);
        Stream stream(device);
        DeviceBuffer buf(device, count);
        const VerifyResult result = verifyOnDevice(
            [&](float* data, size_t n, cudaStream_t s) { comm.allReduceSum(data, n, s); },
            comm.rank(), comm.size(), buf.get(), count, stream.get(), "full-path self-test");
        if (!result.ok) {
          fail(ErrorCode::kInternal,
               "[coll] device all-reduce ({}) self-test failed on rank {}: {}",
               transportName(comm.transport()), comm.rank(), result.describe());
        }
      },
      [](const std::string&) {});
}

// Several nodes: the inter-node transport (inter_select.cc). When NCCL wins, every local
// rank's DeviceComm becomes one ncclAllReduce over the global communicator.
void chooseInter(std::vector<std::unique_ptr<DeviceComm>>& comms, TransportReport& report,
                 const std::vector<Communicator*>& host_comms, const std::vector<int>& devices,
                 const InterOptions& inter, size_t max_count, size_t probe_count) {
  InterSelection sel = selectInter(comms, host_comms, devices, inter, max_count, probe_count);
  report.inter = sel.decision.chosen;
  report.inter_reason = sel.decision.reason;
  std::string here;
  for (size_t r = 0; r < sel.details.size(); ++r) {
    if (sel.details[r].empty()) continue;
    spdlog::warn("[coll] inter-node: nccl on local rank {}: {}", r, sel.details[r]);
    if (here.empty()) here = fmt::format(" (here, local rank {}: {})", r, sel.details[r]);
  }
  if (report.inter == InterTransport::kNccl) {
    spdlog::info("[coll] inter-node: nccl ({})", report.inter_reason);
    std::vector<std::unique_ptr<DeviceComm>> nccl;
    for (size_t r = 0; r < comms.size(); ++r) {
      nccl.push_back(makeDeviceHierarchical(
          comms[r]->rank(), comms[r]->size(), comms[r]->transport(), max_count,
          createNcclGlobalOp(std::move(sel.globals[r])), nullptr));
    }
    comms = std::move(nccl);  // the mesh path's buffers are freed here
    // cudaFree / cudaFreeHost synchronise the device: no rank may enqueue an NCCL all-reduce
    // (which waits on the GPU for every peer) while a peer still frees the check's buffers,
    // or the two wait for each other. So every rank of every node meets here once first.
    runLocalRanks(
        devices, [&](int r) { host_comms[static_cast<size_t>(r)]->barrier(); },
        [](const std::string&) {});
    return;
  }
  if (inter.requested == InterTransport::kNccl) {
    fail(ErrorCode::kUnsupported,
         "[coll] --inter-transport nccl: NCCL across nodes is unavailable: {}{}; use "
         "--inter-transport mesh (or auto)",
         report.inter_reason, here);
  }
  if (inter.requested == InterTransport::kMesh) {
    report.inter_reason = "forced";
    spdlog::info("[coll] inter-node: mesh ({})", report.inter_reason);
  } else if (report.inter_reason.rfind("measured", 0) == 0) {
    spdlog::info("[coll] inter-node: mesh ({})", report.inter_reason);
  } else {
    report.inter_reason = "nccl not used: " + report.inter_reason + here;
    spdlog::info("[coll] inter-node: {}; using the TCP mesh", report.inter_reason);
  }
}

}  // namespace

void runLocalRanks(const std::vector<int>& devices, const std::function<void(int)>& fn,
                   const std::function<void(const std::string&)>& on_error) {
  std::vector<std::thread> threads;
  std::exception_ptr first;
  std::mutex mutex;
  for (size_t r = 0; r < devices.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        TP_CUDA(cudaSetDevice(devices[r]));
        fn(static_cast<int>(r));
      } catch (const std::exception& e) {
        {
          std::lock_guard lock(mutex);
          if (!first) first = std::current_exception();
        }
        on_error(e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

std::unique_ptr<DeviceGroup> DeviceGroup::create(std::vector<Communicator*> host_comms,
                                                 std::vector<int> devices, Transport requested,
                                                 size_t max_count, size_t probe_bytes,
                                                 InterOptions inter) {
  const size_t ranks = host_comms.size();
  if (ranks == 0 || devices.size() != ranks) {
    fail(ErrorCode::kInvalidArgument, "[coll] device group: {} host communicators, {} devices",
         ranks, devices.size());
  }
  if (max_count == 0) fail(ErrorCode::kInvalidArgument, "[coll] device group: max_count is 0");
  for (Communicator* c : host_comms) {
    if (c == nullptr) fail(ErrorCode::kInvalidArgument, "[coll] device group: null communicator");
  }
  const int size = host_comms[0]->size();
  if (size % static_cast<int>(ranks) != 0) {
    fail(ErrorCode::kInvalidArgument, "[coll] device group: {} global ranks, {} local ones", size,
         ranks);
  }
  const bool multi_node = size > static_cast<int>(ranks);
  int device_count = 0;
  TP_CUDA(cudaGetDeviceCount(&device_count));
  for (int d : devices) {
    if (d < 0 || d >= device_count) {
      fail(ErrorCode::kResource, "[coll] device {} does not exist ({} CUDA devices visible)", d,
           device_count);
    }
  }

  Probe probe(static_cast<int>(ranks));
  probe.max_count = max_count;
  probe.probe_count = std::clamp<size_t>(probe_bytes / sizeof(float), 1, max_count);
  probe.timing = requested == Transport::kAuto;
  probe.pair_failures.assign(ranks, "");
  TransportReport report;
  for (size_t k = 0; k < kOrder.size(); ++k) {
    const Transport t = kOrder[k];
    probe.failures[k].assign(ranks, "");
    probe.median_us[k].assign(ranks, 0.0);
    if (requested != Transport::kAuto && requested != t) continue;
    std::string why = availability(t, devices);
    if (why.empty()) {
      try {
        if (t == Transport::kP2p) probe.p2p = std::make_shared<P2pShared>(devices, max_count);
        if (t == Transport::kNccl) probe.nccl = createNcclShared(devices);
      } catch (const Error& e) {
        why = e.what();
      }
    }
    if (!why.empty()) {
      if (requested == t) {
        fail(ErrorCode::kUnsupported, "[coll] {} transport unavailable: {}", transportName(t), why);
      }
      spdlog::info("[coll] device all-reduce: {} not offered: {}", transportName(t), why);
      report.demoted.push_back(fmt::format("{}: {}", transportName(t), why));
      continue;
    }
    probe.tried[k] = true;
  }
  if (probe.tried[indexOf(Transport::kHost)]) {
    probe.cpu_group = LocalGroup::create(static_cast<int>(ranks));
    for (size_t r = 0; r < ranks; ++r) {
      probe.cpu_comms.push_back(probe.cpu_group->communicator(static_cast<int>(r)));
    }
  }
  runLocalRanks(
      devices, [&](int r) { probeRank(probe, devices, r); },
      [&](const std::string& what) {
        probe.barrier.abort(ErrorCode::kAborted, what);
        if (probe.cpu_group) probe.cpu_group->abort(ErrorCode::kAborted, what);
        if (probe.p2p) probe.p2p->barrier.abort(ErrorCode::kAborted, what);
      });
  const Transport chosen = choose(probe, requested, report);
  if (chosen != Transport::kP2p) probe.p2p.reset();
  if (chosen != Transport::kNccl) probe.nccl.reset();
  auto comms = buildComms(probe, chosen, host_comms, devices, multi_node);
  verifyFullPath(comms, devices, max_count);
  spdlog::info("[coll] device all-reduce: chosen {} ({})", transportName(chosen), report.reason);
  if (multi_node) {
    chooseInter(comms, report, host_comms, devices, inter, max_count, probe.probe_count);
  } else {
    report.inter_reason = "one node";
  }
  return std::make_unique<DeviceGroupImpl>(std::move(comms), std::move(report));
}

}  // namespace tpnode::collectives::cuda
