// NCCL health: one all-reduce (sum, f32) over every local device in this process with known
// values, checked on every device, then timed. Device d holds (d + 1) * (i % 7 + 1) at index
// i, so every element of the result is n(n+1)/2 * (i % 7 + 1), exact in f32.
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "tools/tptopo/gpu_internal.h"

namespace tpnode::tptopo::gpu {
namespace {

void checkNcclCall(ncclResult_t r, const char* call) {
  if (r != ncclSuccess) {
    const char* last = ncclGetLastError(nullptr);
    throw CudaFailure{fmt::format("{}: {}{}{}", call, ncclGetErrorString(r),
                                  last != nullptr && *last != '\0' ? " - " : "",
                                  last != nullptr ? last : "")};
  }
}

// One communicator, buffer and stream per local device (ncclCommInitAll), released together.
class LocalNccl {
 public:
  LocalNccl(int devices, size_t count) : n_(devices), count_(count) {
    comms_.assign(static_cast<size_t>(n_), nullptr);
    std::vector<int> ids(static_cast<size_t>(n_));
    for (int d = 0; d < n_; ++d) ids[static_cast<size_t>(d)] = d;
    checkNcclCall(ncclCommInitAll(comms_.data(), n_, ids.data()), "ncclCommInitAll");
    for (int d = 0; d < n_; ++d) {
      bufs_.push_back(std::make_unique<DeviceBuffer>(d, count_ * sizeof(float)));
      streams_.push_back(std::make_unique<Stream>(d));
    }
  }
  ~LocalNccl() {
    for (ncclComm_t c : comms_) {
      if (c != nullptr) ncclCommDestroy(c);
    }
  }
  LocalNccl(const LocalNccl&) = delete;
  LocalNccl& operator=(const LocalNccl&) = delete;

  // Device d holds (d + 1) * (i % 7 + 1).
  void fill() {
    std::vector<float> h(count_);
    for (int d = 0; d < n_; ++d) {
      for (size_t i = 0; i < count_; ++i) {
        h[i] = static_cast<float>((d + 1) * static_cast<int>(i % 7 + 1));
      }
      check(cudaSetDevice(d), "cudaSetDevice");
      check(cudaMemcpy(buf(d), h.data(), count_ * sizeof(float), cudaMemcpyHostToDevice),
            "cudaMemcpy");
    }
  }

  // In place, every device at once; returns when every stream is done.
  void allReduce() {
    checkNcclCall(ncclGroupStart(), "ncclGroupStart");
    for (int d = 0; d < n_; ++d) {
      checkNcclCall(ncclAllReduce(buf(d), buf(d), count_, ncclFloat, ncclSum,
                                  comms_[static_cast<size_t>(d)], stream(d)),
                    "ncclAllReduce");
    }
    checkNcclCall(ncclGroupEnd(), "ncclGroupEnd");
    for (int d = 0; d < n_; ++d) {
      check(cudaSetDevice(d), "cudaSetDevice");
      check(cudaStreamSynchronize(stream(d)), "cudaStreamSynchronize");
    }
  }

  // "" when every element on every device is n(n+1)/2 * (i % 7 + 1), else the first wrong one.
  std::string verify() const {
    std::vector<float> h(count_);
    const float sum = static_cast<float>(n_ * (n_ + 1) / 2);
    for (int d = 0; d < n_; ++d) {
      check(cudaSetDevice(d), "cudaSetDevice");
      check(cudaMemcpy(h.data(), buf(d), count_ * sizeof(float), cudaMemcpyDeviceToHost),
            "cudaMemcpy");
      for (size_t i = 0; i < count_; ++i) {
        const float want = sum * static_cast<float>(i % 7 + 1);
        if (h[i] != want) {
          return fmt::format("device {} element {}: {} where {} was expected", d, i, h[i], want);
        }
      }
    }
    return "";
  }

 private:
  void* buf(int d) const { return bufs_[static_cast<size_t>(d)]->get(); }
  cudaStream_t stream(int d) const { return streams_[static_cast<size_t>(d)]->get(); }

  const int n_;
  const size_t count_;
  std::vector<ncclComm_t> comms_;
  std::vector<std::unique_ptr<DeviceBuffer>> bufs_;
  std::vector<std::unique_ptr<Stream>> streams_;
};

// The median of `reps` timed all-reduces, in microseconds.
double timeAllReduce(LocalNccl& nccl, int reps) {
  std::vector<double> us;
  for (int it = 0; it < reps; ++it) {
    auto t0 = std::chrono::steady_clock::now();
    nccl.allReduce();  // sums again: the values grow, the timing does not care
    us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

}  // namespace

std::string ncclVersion() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "unknown";
  // NCCL >= 2.9: major * 10000 + minor * 100 + patch.
  return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
}

void checkNccl(const TopoOptions& o, HostReport& host) {
  NcclResult& r = host.cuda.nccl;
  const int n = static_cast<int>(host.cuda.devices.size());
  const size_t count = (static_cast<size_t>(o.gpu_mib) << 20) / sizeof(float);
  const std::string scope = "node " + std::to_string(host.node);
  r.ran = true;
  r.devices = n;
  r.bytes = count * sizeof(float);
  spdlog::info("[tptopo] NCCL all-reduce over {} device(s), {} MiB", n, o.gpu_mib);
  try {
    LocalNccl nccl(n, count);
    nccl.fill();
    nccl.allReduce();
    r.error = nccl.verify();
    r.ok = r.error.empty();
    if (r.ok) {
      r.time_us = timeAllReduce(nccl, 10);
      r.algbw_gbps = static_cast<double>(r.bytes) / r.time_us / 1e3;
      r.busbw_gbps = r.algbw_gbps * 2.0 * (n - 1) / n;
    }
  } catch (const CudaFailure& f) {
    r.ok = false;
    r.error = f.what;
  }
  if (!r.ok) {
    host.checks.push_back(
        {"gpu.nccl", scope, Verdict::kFailed, "NCCL all-reduce failed: " + r.error});
    return;
  }
  if (n == 1) {
    // One device: NCCL's all-reduce is a local no-op copy, so a bandwidth would mean nothing.
    r.algbw_gbps = 0;
    r.busbw_gbps = 0;
    host.checks.push_back(
        {"gpu.nccl", scope, Verdict::kOk,
         fmt::format("all-reduce of {} MiB on 1 device correct (NCCL {}); {:.1f} us per call, "
                     "no bandwidth with a single device",
                     o.gpu_mib, host.cuda.nccl_version, r.time_us)});
    return;
  }
  host.checks.push_back(
      {"gpu.nccl", scope, Verdict::kOk,
       fmt::format("all-reduce of {} MiB over {} device(s) correct; {:.0f} us, "
                   "algbw {:.1f} GB/s, busbw {:.1f} GB/s (NCCL {})",
                   o.gpu_mib, n, r.time_us, r.algbw_gbps, r.busbw_gbps, host.cuda.nccl_version)});
}

}  // namespace tpnode::tptopo::gpu
