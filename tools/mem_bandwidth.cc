#include "tools/mem_bandwidth.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "model/host_buffer.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tpnode::tools {
namespace {

constexpr size_t kPrefetch = 4096;  // bytes ahead of each stream (prefetch variants)

// Reads `streams` consecutive slices of [p, p + bytes) side by side, 128 bytes per slice and
// step; returns a value made from the loads (keeps them). bytes % (streams * 128) == 0.
using ReadFn = uint64_t (*)(const uint8_t* p, size_t bytes, int streams, bool prefetch);

uint64_t readWords(const uint8_t* p, size_t bytes, int streams, bool prefetch) {
  const size_t slice = bytes / static_cast<size_t>(streams);
  uint64_t acc[8][4] = {};
  for (size_t off = 0; off < slice; off += 128) {
    for (int s = 0; s < streams; ++s) {
      const uint8_t* q = p + static_cast<size_t>(s) * slice + off;
      if (prefetch) __builtin_prefetch(q + kPrefetch);
      const auto* w = reinterpret_cast<const uint64_t*>(q);
      for (int k = 0; k < 16; k += 4) {
        acc[s][0] += w[k];
        acc[s][1] += w[k + 1];
        acc[s][2] += w[k + 2];
        acc[s][3] += w[k + 3];
      }
    }
  }
  uint64_t r = 0;
  for (auto& a : acc) r += a[0] ^ a[1] ^ a[2] ^ a[3];
  return r;
}

#if defined(__x86_64__)
template <int S>
__attribute__((target("avx2"))) uint64_t readAvx2S(const uint8_t* p, size_t bytes, bool pf) {
  const size_t slice = bytes / S;
  __m256i a[S][2];
  for (int s = 0; s < S; ++s) a[s][0] = a[s][1] = _mm256_setzero_si256();
  for (size_t off = 0; off < slice; off += 128) {
#pragma GCC unroll 8
    for (int s = 0; s < S; ++s) {
      const uint8_t* q = p + static_cast<size_t>(s) * slice + off;
      if (pf) _mm_prefetch(reinterpret_cast<const char*>(q + kPrefetch), _MM_HINT_T0);
      const auto* v = reinterpret_cast<const __m256i*>(q);
      a[s][0] = _mm256_xor_si256(
          a[s][0], _mm256_xor_si256(_mm256_loadu_si256(v), _mm256_loadu_si256(v + 2)));
      a[s][1] = _mm256_xor_si256(
          a[s][1], _mm256_xor_si256(_mm256_loadu_si256(v + 1), _mm256_loadu_si256(v + 3)));
    }
  }
  __m256i r = _mm256_setzero_si256();
  for (int s = 0; s < S; ++s) r = _mm256_xor_si256(r, _mm256_xor_si256(a[s][0], a[s][1]));
  return static_cast<uint64_t>(_mm256_extract_epi64(r, 0) ^ _mm256_extract_epi64(r, 3));
}

__attribute__((target("avx2"))) uint64_t readAvx2(const uint8_t* p, size_t bytes, int streams,
                                                  bool pf) {
  switch (streams) {
    case 1:
      return readAvx2S<1>(p, bytes, pf);
    case 2:
      return readAvx2S<2>(p, bytes, pf);
    case 4:
      return readAvx2S<4>(p, bytes, pf);
    default:
      return readAvx2S<8>(p, bytes, pf);
  }
}

template <int S>
__attribute__((target("avx512f"))) uint64_t readAvx512S(const uint8_t* p, size_t bytes, bool pf) {
  const size_t slice = bytes / S;
  __m512i a[S];
  for (int s = 0; s < S; ++s) a[s] = _mm512_setzero_si512();
  for (size_t off = 0; off < slice; off += 128) {
#pragma GCC unroll 8
    for (int s = 0; s < S; ++s) {
      const uint8_t* q = p + static_cast<size_t>(s) * slice + off;
      if (pf) _mm_prefetch(reinterpret_cast<const char*>(q + kPrefetch), _MM_HINT_T0);
      // Both lines of the step in one ternary op: a = a ^ x ^ y.
      a[s] =
          _mm512_ternarylogic_epi64(a[s], _mm512_loadu_si512(q), _mm512_loadu_si512(q + 64), 0x96);
    }
  }
  __m512i r = _mm512_setzero_si512();
  for (int s = 0; s < S; ++s) r = _mm512_xor_si512(r, a[s]);
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, r);
  return lanes[0] ^ lanes[7];
}

__attribute__((target("avx512f"))) uint64_t readAvx512(const uint8_t* p, size_t bytes, int streams,
                                                       bool pf) {
  switch (streams) {
    case 1:
      return readAvx512S<1>(p, bytes, pf);
    case 2:
      return readAvx512S<2>(p, bytes, pf);
    case 4:
      return readAvx512S<4>(p, bytes, pf);
    default:
      return readAvx512S<8>(p, bytes, pf);
  }
}
#endif

struct Reader {
  const char* name;
  ReadFn fn;
};

Reader widestReader() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return {"avx512", readAvx512};
  if (__builtin_cpu_supports("avx2")) return {"avx2", readAvx2};
#endif
  return {"64-bit", readWords};
}

}  // namespace

uint64_t readSlices(const uint8_t* p, size_t bytes, int streams) {
  static const Reader reader = widestReader();
  const size_t step = static_cast<size_t>(streams) * 128;
  const size_t main = bytes / step * step;
  uint64_t r = main > 0 ? reader.fn(p, main, streams, false) : 0;
  for (size_t off = main; off < bytes; ++off) r += p[off];
  return r;
}

size_t llcBytes() {
  long l3 = -1;
#if defined(_SC_LEVEL3_CACHE_SIZE)
  l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (l3 <= 0) l3 = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
  return l3 > 0 ? static_cast<size_t>(l3) : 0;
}

MemBandwidth measureMemBandwidth(size_t bytes, int threads, int reps) {
  threads = std::max(1, threads);
  reps = std::max(1, reps);
  bytes = std::max<size_t>(bytes / 1024 * 1024, 1024);  // a multiple of 8 streams x 128 bytes
  const auto n = static_cast<size_t>(threads);
  // The memory tpnode keeps weights in (HostBuffer: 2 MiB aligned, transparent huge pages), every
  // page written so that reads hit memory, not the shared zero page.
  std::vector<model::HostBuffer> src, dst;
  for (size_t t = 0; t < n; ++t) {
    src.emplace_back(bytes);
    dst.emplace_back(bytes);
    std::memset(src[t].data(), static_cast<int>(t + 1), bytes);
    std::memset(dst[t].data(), 0, bytes);
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
  const Reader reader = widestReader();
  for (int streams : {1, 2, 4, 8}) {
    for (bool prefetch : {false, true}) {
      const double gbps =
          timed([&](size_t t) { sinks[t] ^= reader.fn(src[t].data(), bytes, streams, prefetch); });
      if (gbps > out.read_gbps) {
        out.read_gbps = gbps;
        out.read_how = std::string(reader.name) + " x" + std::to_string(streams) +
                       (prefetch ? " prefetch" : "");
      }
    }
  }
  out.sink = sinks[0] & 1;
  return out;
}

}  // namespace tpnode::tools
