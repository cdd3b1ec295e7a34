#include "tools/mem_bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace tpnode::tools {

MemBandwidth measureMemBandwidth(size_t bytes, int threads, int reps) {
  threads = std::max(1, threads);
  reps = std::max(1, reps);
  bytes = std::max<size_t>(bytes / 32 * 32, 32);
  const auto n = static_cast<size_t>(threads);
  std::vector<std::vector<uint64_t>> src(n), dst(n);
  for (size_t t = 0; t < n; ++t) {
    src[t].assign(bytes / 8, static_cast<uint64_t>(t) + 1);
    dst[t].assign(bytes / 8, 0);
  }
  auto timed = [&](auto&& body) {
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      std::vector<std::thread> ts;
      for (size_t t = 0; t < n; ++t) ts.emplace_back(body, t);
      for (auto& th : ts) th.join();
      best = std::min(best,
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return static_cast<double>(bytes) * static_cast<double>(threads) / best / 1e9;
  };
  std::vector<uint64_t> sinks(n);
  MemBandwidth out;
  out.copy_gbps = timed([&](size_t t) { std::memcpy(dst[t].data(), src[t].data(), bytes); });
  out.read_gbps = timed([&](size_t t) {
    uint64_t a = 0, b = 0, c = 0, d = 0;
    const uint64_t* p = src[t].data();
    for (size_t i = 0; i + 4 <= bytes / 8; i += 4) {
      a += p[i];
      b += p[i + 1];
      c += p[i + 2];
      d += p[i + 3];
    }
    sinks[t] = a + b + c + d;
  });
  out.sink = sinks[0] & 1;
  return out;
}

}  // namespace tpnode::tools
