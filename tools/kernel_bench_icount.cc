// kernel_bench_icount: instructions each decode kernel (a table's gemv16, or its 16-row prefill
// tile run on one token, one group per call) executes per weight byte, counted exactly by
// single-stepping the calling thread (x86 trap flag, one SIGTRAP per instruction). The count
// does not depend on machine load or on where the bytes come from, so it is the figure to
// compare kernel versions by on a shared machine; tools/kernel_bench gives their speed.
//
//   kernel_bench_icount [--types q4_0,q4_k,q6_k,q8_0,q5_0] [--rows 256] [--cols 2048]
//                       [--isas best|avx512,...]
//
// Prints per type and table: instructions of one call over `rows` rows (rows / 16 groups, read
// as the kernel's streams), the plain weight bytes it reads and their ratio, and the bytes per
// CPU second of repeated calls on those cache-resident weights (best of 7; a rough compute rate).
#include <CLI/CLI.hpp>

#include <signal.h>
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/log.h"
#include "model/kernels/cpu/matmul.h"
#include "model/kernels/cpu/q0_x16.h"
#include "model/kernels/cpu/quantize.h"
#include "tools/kernel_bench_args.h"

using namespace tpnode::model;
using namespace tpnode::model::kernels;
using tpnode::tools::cpuSeconds;
using tpnode::tools::parseIsa;
using tpnode::tools::splitList;

namespace {

#if defined(__x86_64__)
volatile uint64_t g_steps = 0;

void onTrap(int) {
  g_steps = g_steps + 1;
}

// Sets / clears the trap flag (EFLAGS bit 8): every instruction after the set raises SIGTRAP.
inline void trapOn() {
  asm volatile("pushfq\n\torq $0x100, (%%rsp)\n\tpopfq" ::: "memory", "cc");
}
inline void trapOff() {
  asm volatile("pushfq\n\tandq $~0x100, (%%rsp)\n\tpopfq" ::: "memory", "cc");
}

// Instructions executed by f(), less the cost of an empty call.
template <typename F>
uint64_t countInstructions(F&& f) {
  g_steps = 0;
  trapOn();
  f();
  trapOff();
  return g_steps;
}
#endif

[[maybe_unused]] TensorType parseType(const std::string& s) {
  for (TensorType tt : {TensorType::kQ4_K, TensorType::kQ6_K, TensorType::kQ8_0, TensorType::kQ4_0,
                        TensorType::kQ5_0}) {
    std::string name(tensorTypeName(tt));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (name == s) return tt;
  }
  throw CLI::ValidationError("--types", "one of q4_k, q6_k, q8_0, q4_0, q5_0, not " + s);
}

}  // namespace

int main(int argc, char** argv) {
  std::string types_arg = "q4_0,q4_k,q6_k,q8_0,q5_0", isas_arg = "best";
  int64_t rows = 256, cols = 2048;
  CLI::App app{"kernel_bench_icount: instructions per weight byte of the decode kernels"};
  app.add_option("--types", types_arg)->capture_default_str();
  app.add_option("--isas", isas_arg)->capture_default_str();
  app.add_option("--rows", rows, "a multiple of 16")->capture_default_str();
  app.add_option("--cols", cols, "a multiple of 256")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  tpnode::initLogging("warn");
#if !defined(__x86_64__)
  std::fprintf(stderr, "kernel_bench_icount: x86-64 only\n");
  return 2;
#else
  if (rows % 16 != 0 || cols % 256 != 0) {
    std::fprintf(stderr, "--rows must be a multiple of 16, --cols of 256\n");
    return 2;
  }
  struct sigaction sa {};
  sa.sa_handler = onTrap;
  sigaction(SIGTRAP, &sa, nullptr);
  const uint64_t empty = countInstructions([] {});
  std::mt19937 rng(1);
  std::vector<float> x(static_cast<size_t>(cols));
  for (float& f : x) f = std::normal_distribution<float>(0, 1)(rng);
  for (const std::string& isa : splitList(isas_arg)) {
    const DotKernels* k = parseIsa(isa);
    if (!k) {
      std::fprintf(stderr, "--isas: %s is not available on this CPU\n", isa.c_str());
      return 2;
    }
    for (const std::string& tn : splitList(types_arg)) {
      const TensorType type = parseType(tn);
      const Gemv16Fn gemv = k->gemv16ForType(type);
      if (!gemv) {
        std::printf("%-5s %-12s no decode kernel\n", tn.c_str(), std::string(k->isa).c_str());
        continue;
      }
      Matrix m;
      m.type = type;
      m.rows = rows;
      m.cols = cols;
      m.row_bytes = rowBytes(type, static_cast<uint64_t>(cols));
      const size_t plain = m.row_bytes * static_cast<size_t>(rows);
      std::vector<float> w(static_cast<size_t>(rows * cols));
      for (float& f : w) f = std::normal_distribution<float>(0, 0.1f)(rng);
      m.data = HostBuffer(plain);
      for (int64_t r = 0; r < rows; ++r) {
        quantizeRow(type, w.data() + r * cols, m.data.data() + r * m.row_bytes, cols);
      }
      m = packWeights(std::move(m), WeightLayout::kAuto, *k);
      const TensorType at = activationType(type);
      std::vector<uint8_t> act(rowBytes(at, static_cast<uint64_t>(cols)));
      quantizeRow(at, x.data(), act.data(), cols);
      std::vector<int32_t> offs;
      const Gemm16Q0Fn tile_q0 = k->gemm16Q0ForType(type);
      const GemmTileFn tile = k->gemm16ForType(type);
      if (tile_q0) {
        offs.resize(static_cast<size_t>(q0X16OffsetsPerRow(type, cols)));
        q0X16Offsets(type, act.data(), act.size(), 1, cols, offs.data());
      }
      std::vector<float> out(static_cast<size_t>(rows));
      const uint64_t n_gemv = countInstructions([&] {
                                gemv(cols, m.row(0), m.row_bytes * 16, rows / 16, act.data(),
                                     offs.empty() ? nullptr : offs.data(), out.data());
                              }) -
                              empty;
      const uint64_t n_tile =
          countInstructions([&] {
            for (int64_t g = 0; g < rows / 16; ++g) {
              if (tile_q0) {
                tile_q0(cols, m.row(16 * g), act.data(), act.size(), offs.data(), 1, &out[16 * g],
                        0);
              } else {
                tile(cols, m.row(16 * g), act.data(), act.size(), 1, &out[16 * g], 0);
              }
            }
          }) -
          empty;
      // Speed on cache-resident weights (the kernel's compute rate): CPU seconds of repeated calls.
      double best = 1e30;
      for (int rep = 0; rep < 7; ++rep) {
        const double c0 = cpuSeconds();
        for (int i = 0; i < 200; ++i) {
          gemv(cols, m.row(0), m.row_bytes * 16, rows / 16, act.data(),
               offs.empty() ? nullptr : offs.data(), out.data());
        }
        best = std::min(best, (cpuSeconds() - c0) / 200);
      }
      std::printf(
          "%-5s %-12s %lld x %lld, %zu weight bytes: gemv16 %llu instructions (%.4f per "
          "byte, %.1f GB/s in cache), one-token tile %llu (%.4f per byte)\n",
          tn.c_str(), std::string(k->isa).c_str(), static_cast<long long>(rows),
          static_cast<long long>(cols), plain, static_cast<unsigned long long>(n_gemv),
          static_cast<double>(n_gemv) / static_cast<double>(plain),
          static_cast<double>(plain) / best / 1e9, static_cast<unsigned long long>(n_tile),
          static_cast<double>(n_tile) / static_cast<double>(plain));
    }
  }
  return 0;
#endif
}
