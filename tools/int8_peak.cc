// int8_peak: the machine's integer multiply-accumulate peak, the ceiling prefill GEMMs on
// quantized weights are measured against. Each thread runs independent chains of 512-bit
// vpdpbusd (AVX-512 VNNI: 64 u8 x s8 products per instruction) on registers only, so the
// figure is the core's instruction throughput, not memory's. Without AVX-512 VNNI it measures
// AVX-VNNI's 256-bit vpdpbusd (32 products per instruction), else AVX2 vpmaddubsw + vpmaddwd
// (32 products per pair), and says which.
//
//   int8_peak [--threads 1] [--seconds 0.5] [--isa best|avx512vnni|avxvnni|avx2]
//   prints {"threads": N, "isa": "...", "gmacs": G} (10^9 multiply-accumulates per second)
#include <CLI/CLI.hpp>

#include <cpuid.h>
#include <immintrin.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

// gcc 12's 512-bit intrinsics start from _mm512_undefined_*(), which -Wuninitialized reports
// once inlined; the value is never read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // GCC only: clang has no such warning group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace {

constexpr int kChains = 12;       // independent accumulators: > latency x issue width
constexpr int64_t kInner = 4096;  // instructions per chain between clock reads

__attribute__((target("avx512f,avx512bw,avx512vnni"))) int64_t vnniLoop(double seconds,
                                                                        int32_t* sink) {
  __m512i acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_epi32(i);
  __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-5);
  __asm__ volatile("" : "+v"(a), "+v"(b));  // opaque operands: nothing to constant-fold
  int64_t macs = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    for (int64_t k = 0; k < kInner; ++k) {
#pragma GCC unroll 12
      for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
      __asm__ volatile("" : "+v"(acc[0]));
    }
    macs += kInner * kChains * 64;
  }
  __m512i s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_epi32(s, acc[i]);
  alignas(64) int32_t out[16];
  _mm512_store_si512(out, s);
  *sink = out[0];
  return macs;
}

__attribute__((target("avx2,avxvnni"))) int64_t avxVnniLoop(double seconds, int32_t* sink) {
  __m256i acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_epi32(i);
  __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-5);
  __asm__ volatile("" : "+v"(a), "+v"(b));
  int64_t macs = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    for (int64_t k = 0; k < kInner; ++k) {
#pragma GCC unroll 12
      for (int i = 0; i < kChains; ++i) acc[i] = _mm256_dpbusd_avx_epi32(acc[i], a, b);
      __asm__ volatile("" : "+v"(acc[0]));
    }
    macs += kInner * kChains * 32;
  }
  int32_t out[8];
  __m256i s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm256_add_epi32(s, acc[i]);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), s);
  *sink = out[0];
  return macs;
}

__attribute__((target("avx2"))) int64_t avx2Loop(double seconds, int32_t* sink) {
  __m256i acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_epi32(i);
  __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-5), one = _mm256_set1_epi16(1);
  __asm__ volatile("" : "+v"(a), "+v"(b), "+v"(one));
  int64_t macs = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    for (int64_t k = 0; k < kInner; ++k) {
#pragma GCC unroll 12
      for (int i = 0; i < kChains; ++i) {
        acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), one));
      }
      __asm__ volatile("" : "+v"(acc[0]));
    }
    macs += kInner * kChains * 32;
  }
  int32_t out[8];
  __m256i s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm256_add_epi32(s, acc[i]);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), s);
  *sink = out[0];
  return macs;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  double seconds = 0.5;
  std::string isa = "best";
  CLI::App app{"int8_peak: integer multiply-accumulate throughput of this machine"};
  app.add_option("--threads", threads)->capture_default_str()->check(CLI::Range(1, 256));
  app.add_option("--seconds", seconds)->capture_default_str()->check(CLI::Range(0.05, 60.0));
  app.add_option("--isa", isa, "the best this CPU has, or a lower one")
      ->capture_default_str()
      ->check(CLI::IsMember({"best", "avx512vnni", "avxvnni", "avx2"}));
  CLI11_PARSE(app, argc, argv);
  __builtin_cpu_init();
  const bool has_vnni = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
  unsigned a = 0, b = 0, c = 0, d = 0;  // AVX-VNNI: CPUID.(EAX=7,ECX=1):EAX[4]
  const bool has_avx_vnni = __builtin_cpu_supports("avx2") &&
                            __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4)) != 0;
  if ((isa == "avx512vnni" && !has_vnni) || (isa == "avxvnni" && !has_avx_vnni)) {
    std::fprintf(stderr, "--isa %s: not available on this CPU\n", isa.c_str());
    return 2;
  }
  const bool vnni = has_vnni && (isa == "best" || isa == "avx512vnni");
  const bool avx_vnni = !vnni && has_avx_vnni && (isa == "best" || isa == "avxvnni");
  std::atomic<int64_t> total{0};
  std::vector<int32_t> sinks(static_cast<size_t>(threads));
  std::vector<std::thread> pool;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&, i] {
      int32_t* sink = &sinks[static_cast<size_t>(i)];
      total += vnni       ? vnniLoop(seconds, sink)
               : avx_vnni ? avxVnniLoop(seconds, sink)
                          : avx2Loop(seconds, sink);
    });
  }
  for (auto& t : pool) t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  long long sink = 0;
  for (int32_t v : sinks) sink += v;
  std::printf("{\"threads\": %d, \"isa\": \"%s\", \"gmacs\": %.1f, \"sink\": %lld}\n", threads,
              vnni       ? "avx512-vnni vpdpbusd"
              : avx_vnni ? "avx-vnni vpdpbusd"
                         : "avx2 vpmaddubsw+vpmaddwd",
              static_cast<double>(total.load()) / s / 1e9, sink);
  return 0;
}
