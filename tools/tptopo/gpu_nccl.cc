// NCCL health: one all-reduce (sum, f32) over every local device in this process with known
// values, checked on every device, then timed. Device d holds (d + 1) * (i % 7 + 1) at index
// i, so every element of the result is n(n+1)/2 * (i % 7 + 1), exact in f32.
#include <nccl.h>

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

// The communicators of ncclCommInitAll, destroyed together.
struct Comms {
  std::vector<ncclComm_t> comms;
  ~Comms() {
    for (ncclComm_t c : comms) {
      if (c != nullptr) ncclCommDestroy(c);
    }
  }
};

float expected(int n, size_t i) {
  return static_cast<float>(n * (n + 1) / 2) * static_cast<float>(i % 7 + 1);
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
    Comms comms;
    comms.comms.assign(static_cast<size_t>(n), nullptr);
    std::vector<int> devs(static_cast<size_t>(n));
    for (int d = 0; d < n; ++d) devs[static_cast<size_t>(d)] = d;
    checkNcclCall(ncclCommInitAll(comms.comms.data(), n, devs.data()), "ncclCommInitAll");
    std::vector<std::unique_ptr<DeviceBuffer>> bufs;
    std::vector<std::unique_ptr<Stream>> streams;
    std::vector<float> h(count);
    for (int d = 0; d < n; ++d) {
      for (size_t i = 0; i < count; ++i)
        h[i] = static_cast<float>((d + 1) * static_cast<int>(i % 7 + 1));
      bufs.push_back(std::make_unique<DeviceBuffer>(d, r.bytes));
      streams.push_back(std::make_unique<Stream>(d));
      check(cudaMemcpy(bufs.back()->get(), h.data(), r.bytes, cudaMemcpyHostToDevice),
            "cudaMemcpy");
    }
    auto allReduce = [&] {
      checkNcclCall(ncclGroupStart(), "ncclGroupStart");
      for (int d = 0; d < n; ++d) {
        auto k = static_cast<size_t>(d);
        checkNcclCall(ncclAllReduce(bufs[k]->get(), bufs[k]->get(), count, ncclFloat, ncclSum,
                                    comms.comms[k], streams[k]->get()),
                      "ncclAllReduce");
      }
      checkNcclCall(ncclGroupEnd(), "ncclGroupEnd");
      for (int d = 0; d < n; ++d) {
        check(cudaSetDevice(d), "cudaSetDevice");
        check(cudaStreamSynchronize(streams[static_cast<size_t>(d)]->get()),
              "cudaStreamSynchronize");
      }
    };
    allReduce();
    r.ok = true;
    for (int d = 0; d < n && r.ok; ++d) {
      check(cudaSetDevice(d), "cudaSetDevice");
      check(cudaMemcpy(h.data(), bufs[static_cast<size_t>(d)]->get(), r.bytes,
                       cudaMemcpyDeviceToHost),
            "cudaMemcpy");
      for (size_t i = 0; i < count; ++i) {
        if (h[i] != expected(n, i)) {
          r.ok = false;
          r.error = fmt::format("device {} element {}: {} where {} was expected", d, i, h[i],
                                expected(n, i));
          break;
        }
      }
    }
    std::vector<double> us;
    for (int it = 0; it < 10 && r.ok; ++it) {
      auto t0 = std::chrono::steady_clock::now();
      allReduce();  // sums again: the values grow, the timing does not care
      us.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    if (!us.empty()) {
      std::sort(us.begin(), us.end());
      r.time_us = us[us.size() / 2];
      r.algbw_gbps = static_cast<double>(r.bytes) / r.time_us / 1e3;
      r.busbw_gbps = r.algbw_gbps * 2.0 * (n - 1) / n;
    }
  } catch (const CudaFailure& f) {
    r.ok = false;
    r.error = f.what;
  }
  if (r.ok) {
    host.checks.push_back(
        {"gpu.nccl", scope, Verdict::kOk,
         fmt::format("all-reduce of {} MiB over {} device(s) correct; {:.0f} us, "
                     "algbw {:.1f} GB/s, busbw {:.1f} GB/s (NCCL {})",
                     o.gpu_mib, n, r.time_us, r.algbw_gbps, r.busbw_gbps, host.cuda.nccl_version)});
  } else {
    host.checks.push_back(
        {"gpu.nccl", scope, Verdict::kFailed, "NCCL all-reduce failed: " + r.error});
  }
}

}  // namespace tpnode::tptopo::gpu
