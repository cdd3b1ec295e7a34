// int8_peak: the machine's integer multiply-accumulate peak, the ceiling prefill GEMMs on
// quantized weights are measured against. Each thread runs 12 independent accumulator chains of
// one multiply-accumulate step on registers only (more chains than the step's latency x the
// ports that run it), so the figure is the core's instruction throughput, not memory's:
//   avx512-vnni  512-bit vpdpbusd: 64 u8 x s8 products per instruction
//   avx-vnni     256-bit (VEX) vpdpbusd: 32 per instruction
//   avx2         vpmaddubsw + vpmaddwd + vpaddd: 32 per three instructions (what a kernel without
//                VNNI spends on 32 byte products)
// The steps are written in assembly, one block per ISA inside one timing loop: compiled from C++,
// gcc hoisted the AVX2 products out of the loop (loop-invariant operands: only the adds were
// timed, an overstatement) and spilled the AVX-512 accumulators to the stack every iteration
// (an understatement of about 3x).
//
//   int8_peak [--threads 1] [--seconds 0.5] [--isa best|avx512vnni|avxvnni|avx2]
//             [--mix none|fma|mul|cvt|q8_0]
//   prints {"threads": N, "isa": "...", "gmacs": G}: 10^9 multiply-accumulates per second of
//   each thread's CPU time, added over the threads (on a quiet machine, per second of wall time)
#include <CLI/CLI.hpp>

#include <cpuid.h>
#include <time.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int64_t kInner = 4096;  // loop iterations (12 steps each) between clock reads

// The 12 chains' accumulators are registers 2..13; operands 0 and 1 (and 14, 15 for AVX2).
#define TP_CHAINS(S) S(2) S(3) S(4) S(5) S(6) S(7) S(8) S(9) S(10) S(11) S(12) S(13)
#define TP_VNNI512(r) "vpdpbusd %%zmm1, %%zmm0, %%zmm" #r "\n\t"
#define TP_VNNI256(r) "%{vex%} vpdpbusd %%ymm1, %%ymm0, %%ymm" #r "\n\t"
#define TP_AVX2(r)                         \
  "vpmaddubsw %%ymm1, %%ymm0, %%ymm14\n\t" \
  "vpmaddwd %%ymm15, %%ymm14, %%ymm14\n\t" \
  "vpaddd %%ymm14, %%ymm" #r ", %%ymm" #r "\n\t"
#define TP_CLOBBERS                                                                        \
  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", \
      "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "cc"

// `n` iterations of 12 steps after SETUP. Registers start from zeroed / all-ones bytes (the values
// do not change the instructions' speed).
#define TP_PEAK_LOOP(n, SETUP, STEP)                            \
  __asm__ volatile(                                             \
      "vpxor %%xmm0, %%xmm0, %%xmm0\n\t"                        \
      "vpcmpeqd %%ymm1, %%ymm1, %%ymm1\n\t" SETUP               \
      "1:\n\t" TP_CHAINS(STEP) "dec %0\n\tjnz 1b\n\tvzeroupper" \
      : "+r"(n)                                                 \
      :                                                         \
      : TP_CLOBBERS)

struct Vnni512 {
  static constexpr const char* kName = "avx512-vnni vpdpbusd";
  static constexpr int64_t kMacsPerStep = 64;
  static void run(int64_t n) { TP_PEAK_LOOP(n, "", TP_VNNI512); }
};

// Each vpdpbusd followed by independent 512-bit float work (chains in zmm16-27 on zeroed operands,
// zmm30 a temporary), to see which of it shares the vpdpbusd's ports (--mix):
//   fma      one vfmadd231ps: llama.cpp's x86 Q8_0 dot product spends one FMA per vpdpbusd (each
//            4-column chunk's integer sum scaled into its own float lane), so on a core where the
//            two share ports this is the vpdpbusd rate a kernel in that order can reach at most
//   mul      one vmulps
//   cvt      one vcvtdq2ps
//   q8_0     vcvtdq2ps then vfmadd231ps of its result: the Q8_0 order's whole float step
#define TP_PAIR_ACC_2 "16"
#define TP_PAIR_ACC_3 "17"
#define TP_PAIR_ACC_4 "18"
#define TP_PAIR_ACC_5 "19"
#define TP_PAIR_ACC_6 "20"
#define TP_PAIR_ACC_7 "21"
#define TP_PAIR_ACC_8 "22"
#define TP_PAIR_ACC_9 "23"
#define TP_PAIR_ACC_10 "24"
#define TP_PAIR_ACC_11 "25"
#define TP_PAIR_ACC_12 "26"
#define TP_PAIR_ACC_13 "27"
#define TP_VNNI512_FMA(r) TP_VNNI512(r) "vfmadd231ps %%zmm28, %%zmm29, %%zmm" TP_PAIR_ACC_##r "\n\t"
#define TP_VNNI512_MUL(r) TP_VNNI512(r) "vmulps %%zmm28, %%zmm29, %%zmm" TP_PAIR_ACC_##r "\n\t"
#define TP_VNNI512_CVT(r) TP_VNNI512(r) "vcvtdq2ps %%zmm28, %%zmm" TP_PAIR_ACC_##r "\n\t"
#define TP_VNNI512_Q8_0(r)         \
  TP_VNNI512(r)                    \
  "vcvtdq2ps %%zmm28, %%zmm30\n\t" \
  "vfmadd231ps %%zmm29, %%zmm30, %%zmm" TP_PAIR_ACC_##r "\n\t"

// avx512f: the clobbers of zmm16-30 are valid only in an AVX-512 function.
#define TP_PAIRED_LOOP(n, STEP)                                                              \
  __asm__ volatile(                                                                          \
      "vpxor %%xmm0, %%xmm0, %%xmm0\n\t"                                                     \
      "vpcmpeqd %%ymm1, %%ymm1, %%ymm1\n\t"                                                  \
      "vpxord %%xmm28, %%xmm28, %%xmm28\n\t"                                                 \
      "vpxord %%xmm29, %%xmm29, %%xmm29\n\t"                                                 \
      "1:\n\t" TP_CHAINS(STEP) "dec %0\n\tjnz 1b\n\tvzeroupper"                              \
      : "+r"(n)                                                                              \
      :                                                                                      \
      : TP_CLOBBERS, "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", \
        "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30")

// One --mix: `kName`, the paired loop of STEP (64 multiply-accumulates per step: the vpdpbusd's).
#define TP_PAIRED_MIX(Type, name, STEP)                                                        \
  struct Type {                                                                                \
    static constexpr const char* kName = name;                                                 \
    static constexpr int64_t kMacsPerStep = 64;                                                \
    __attribute__((target("avx512f"))) static void run(int64_t n) { TP_PAIRED_LOOP(n, STEP); } \
  };
TP_PAIRED_MIX(Vnni512Fma, "avx512-vnni vpdpbusd + vfmadd231ps", TP_VNNI512_FMA)
TP_PAIRED_MIX(Vnni512Mul, "avx512-vnni vpdpbusd + vmulps", TP_VNNI512_MUL)
TP_PAIRED_MIX(Vnni512Cvt, "avx512-vnni vpdpbusd + vcvtdq2ps", TP_VNNI512_CVT)
TP_PAIRED_MIX(Vnni512Q8_0, "avx512-vnni vpdpbusd + vcvtdq2ps + vfmadd231ps", TP_VNNI512_Q8_0)

struct Vnni256 {
  static constexpr const char* kName = "avx-vnni vpdpbusd";
  static constexpr int64_t kMacsPerStep = 32;
  static void run(int64_t n) { TP_PEAK_LOOP(n, "", TP_VNNI256); }
};

struct Avx2 {
  static constexpr const char* kName = "avx2 vpmaddubsw+vpmaddwd+vpaddd";
  static constexpr int64_t kMacsPerStep = 32;
  static void run(int64_t n) { TP_PEAK_LOOP(n, "vpcmpeqd %%ymm15, %%ymm15, %%ymm15\n\t", TP_AVX2); }
};

double threadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Multiply-accumulates per CPU second of one thread running for `seconds` of wall time: CPU time,
// so that time the thread spends descheduled (a machine shared with other work) does not count.
template <typename Step>
double macRate(double seconds) {
  int64_t macs = 0;
  const double c0 = threadCpuSeconds();
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    Step::run(kInner);
    macs += kInner * 12 * Step::kMacsPerStep;
  }
  return static_cast<double>(macs) / (threadCpuSeconds() - c0);
}

// The threads' rates added up.
template <typename Step>
double gmacs(int threads, double seconds) {
  std::vector<double> rates(static_cast<size_t>(threads));
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&, i] { rates[static_cast<size_t>(i)] = macRate<Step>(seconds); });
  }
  for (auto& t : pool) t.join();
  double total = 0;
  for (double r : rates) total += r;
  return total / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  double seconds = 0.5;
  std::string isa = "best";
  std::string mix = "none";
  CLI::App app{"int8_peak: integer multiply-accumulate throughput of this machine"};
  app.add_option("--threads", threads)->capture_default_str()->check(CLI::Range(1, 256));
  app.add_option("--seconds", seconds)->capture_default_str()->check(CLI::Range(0.05, 60.0));
  app.add_option("--isa", isa, "the best this CPU has, or a lower one")
      ->capture_default_str()
      ->check(CLI::IsMember({"best", "avx512vnni", "avxvnni", "avx2"}));
  app.add_option("--mix", mix,
                 "each 512-bit vpdpbusd paired with an independent fma, mul or cvt (vcvtdq2ps), "
                 "or q8_0 (cvt then fma: llama.cpp's Q8_0 order); AVX-512 VNNI only")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "fma", "mul", "cvt", "q8_0"}));
  CLI11_PARSE(app, argc, argv);
  __builtin_cpu_init();
  const bool has_vnni = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
  unsigned a = 0, b = 0, c = 0, d = 0;  // AVX-VNNI: CPUID.(EAX=7,ECX=1):EAX[4]
  const bool has_avx2 = __builtin_cpu_supports("avx2");
  const bool has_avx_vnni =
      has_avx2 && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4)) != 0;
  if ((isa == "avx512vnni" && !has_vnni) || (isa == "avxvnni" && !has_avx_vnni) || !has_avx2) {
    std::fprintf(stderr, "--isa %s: not available on this CPU\n", isa.c_str());
    return 2;
  }
  const bool vnni = has_vnni && (isa == "best" || isa == "avx512vnni");
  const bool avx_vnni = !vnni && has_avx_vnni && (isa == "best" || isa == "avxvnni");
  if (mix != "none") {
    if (!vnni) {
      std::fprintf(stderr, "--mix %s: needs AVX-512 VNNI (--isa best or avx512vnni)\n",
                   mix.c_str());
      return 2;
    }
    const auto print = [&](const char* name, double g) {
      std::printf("{\"threads\": %d, \"isa\": \"%s\", \"gmacs\": %.1f}\n", threads, name, g);
    };
    if (mix == "fma") print(Vnni512Fma::kName, gmacs<Vnni512Fma>(threads, seconds));
    if (mix == "mul") print(Vnni512Mul::kName, gmacs<Vnni512Mul>(threads, seconds));
    if (mix == "cvt") print(Vnni512Cvt::kName, gmacs<Vnni512Cvt>(threads, seconds));
    if (mix == "q8_0") print(Vnni512Q8_0::kName, gmacs<Vnni512Q8_0>(threads, seconds));
    return 0;
  }
  const double g = vnni       ? gmacs<Vnni512>(threads, seconds)
                   : avx_vnni ? gmacs<Vnni256>(threads, seconds)
                              : gmacs<Avx2>(threads, seconds);
  std::printf("{\"threads\": %d, \"isa\": \"%s\", \"gmacs\": %.1f}\n", threads,
              vnni       ? Vnni512::kName
              : avx_vnni ? Vnni256::kName
                         : Avx2::kName,
              g);
  return 0;
}
