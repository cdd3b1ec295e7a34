// The P2P matrix: for every ordered pair of devices, whether peer access is claimed, whether a
// known pattern survives a copy src -> dst (peer to peer) and back to the host, and the copy
// bandwidth and latency. A pair that claims access but corrupts data is "demoted".
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "tools/tptopo/gpu_internal.h"

namespace tpnode::tptopo::gpu {
namespace {

void measurePair(const TopoOptions& o, P2pPair& p) {
  int access = 0;
  check(cudaDeviceCanAccessPeer(&access, p.src, p.dst), "cudaDeviceCanAccessPeer");
  p.access = access != 0;
  if (p.access) {
    check(cudaSetDevice(p.src), "cudaSetDevice");
    cudaError_t err = cudaDeviceEnablePeerAccess(p.dst, 0);
    if (err == cudaErrorPeerAccessAlreadyEnabled) {
      cudaGetLastError();
    } else {
      check(err, "cudaDeviceEnablePeerAccess");
    }
  }
  const size_t bytes = static_cast<size_t>(o.gpu_mib) << 20;
  const size_t words = bytes / 4;
  PinnedBuffer host_in(bytes), host_out(bytes);
  auto* in = static_cast<uint32_t*>(host_in.get());
  for (size_t i = 0; i < words; ++i)
    in[i] = patternWord(static_cast<uint32_t>(p.src * 31 + p.dst), i);
  std::memset(host_out.get(), 0, bytes);
  DeviceBuffer a(p.src, bytes), b(p.dst, bytes);
  Stream stream(p.src);
  check(cudaMemcpy(a.get(), host_in.get(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  check(cudaMemcpyPeer(b.get(), p.dst, a.get(), p.src, bytes), "cudaMemcpyPeer");
  check(cudaSetDevice(p.dst), "cudaSetDevice");
  check(cudaMemcpy(host_out.get(), b.get(), bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  p.roundtrip_ok = std::memcmp(host_in.get(), host_out.get(), bytes) == 0;
  check(cudaSetDevice(p.src), "cudaSetDevice");  // the stream's device, for the events
  const double us = medianUs(stream.get(), 5, [&] {
    check(cudaMemcpyPeerAsync(b.get(), p.dst, a.get(), p.src, bytes, stream.get()),
          "cudaMemcpyPeerAsync");
  });
  p.bandwidth_gbps = us > 0 ? static_cast<double>(bytes) / us / 1e3 : 0;
  p.latency_us = medianUs(stream.get(), 20, [&] {
    check(cudaMemcpyPeerAsync(b.get(), p.dst, a.get(), p.src, 4, stream.get()),
          "cudaMemcpyPeerAsync");
  });
}

}  // namespace

void checkP2p(const TopoOptions& o, HostReport& host) {
  const int n = static_cast<int>(host.cuda.devices.size());
  const std::string scope = "node " + std::to_string(host.node);
  if (n < 2) {
    host.checks.push_back({"gpu.p2p", scope, Verdict::kSkipped, "one device: no pair to test"});
    return;
  }
  for (int s = 0; s < n; ++s) {
    for (int d = 0; d < n; ++d) {
      if (s == d) continue;
      P2pPair p;
      p.src = s;
      p.dst = d;
      spdlog::info("[tptopo] P2P {} -> {}", s, d);
      try {
        measurePair(o, p);
        if (p.access && !p.roundtrip_ok) {
          p.demoted = true;
          p.verdict = Verdict::kDegraded;
          p.detail = "demoted: claims peer access but the data round trip came back wrong";
        } else if (!p.roundtrip_ok) {
          p.verdict = Verdict::kFailed;
          p.detail = "the data round trip (staged through the host) came back wrong";
        } else if (!p.access) {
          p.verdict = Verdict::kDegraded;
          p.detail = "no peer access: copies are staged through host memory";
        } else {
          p.detail = fmt::format("{:.1f} GB/s, {:.1f} us", p.bandwidth_gbps, p.latency_us);
        }
      } catch (const CudaFailure& f) {
        p.verdict = Verdict::kFailed;
        p.detail = f.what;
      }
      host.checks.push_back(
          {"gpu.p2p", fmt::format("{} gpu {}->{}", scope, s, d), p.verdict, p.detail});
      host.cuda.p2p.push_back(std::move(p));
    }
  }
}

}  // namespace tpnode::tptopo::gpu
