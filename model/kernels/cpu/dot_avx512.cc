// AVX-512 (F, BW, VL, VNNI) dot products (compiled with those flags; called only when the CPU
// has them).
#define TP_X86_VNNI 1
#define TP_X86_AVX512 1
// GCC 12's AVX-512 intrinsics (_mm512_extractf64x4_pd) trip these warnings at -O3 on their own
// undefined pass-through operands (as in ggml_math_avx512.cc).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// Each kernel file uses helpers of the ones before it: the order matters.
// clang-format off
#include "model/kernels/cpu/dot_x86.inc"
#include "model/kernels/cpu/dot_x86_q4k_x16.inc"
#include "model/kernels/cpu/dot_x86_q0_x16.inc"
#include "model/kernels/cpu/dot_x86_q6k_x16.inc"
#include "model/kernels/cpu/dot_x86_q5.inc"
#include "model/kernels/cpu/dot_x86_gemv16.inc"
#include "model/kernels/cpu/dot_x86_f16.inc"
#include "model/kernels/cpu/dot_x86_table.inc"
// clang-format on

namespace tpnode::model::kernels {

GemmRowsFn avx512Bf16RowsTile();    // dot_avx512_bf16.cc: nullptr without AVX512_BF16
Gemm16ValuesFn amxQ4KValuesTile();  // q4k_amx.cc: nullptr without AMX-INT8
Unpack16Fn amxQ4KUnpack();          // q4k_amx.cc: nullptr without AMX-INT8

DecodePrefetch decodePrefetch() {
  return g_decode_prefetch.load(std::memory_order_relaxed);
}

void setDecodePrefetch(DecodePrefetch choice) {
  g_decode_prefetch.store(choice, std::memory_order_relaxed);
}

const DotKernels& avx512Table() {
  static const DotKernels k = [] {
    DotKernels t = x86Table("avx512-vnni");
    t.x16_q4_k = dot16Q4K;  // the 16-row Q4_K layout (q4k_x16.h) needs VNNI
    t.gemm16_q4_k = gemm16Q4K;
    t.gemm16_q6_k = gemm16Q6K;
    t.unpack16_q4_k = unpack16Q4K;  // prefill over many tokens: groups unpacked once
    t.unpack16_q6_k = unpack16Q6K;
    t.gemm16_values_q4_k = gemm16ValuesQ4K;
    t.gemm16_values_q6_k = gemm16ValuesQ6K;
    t.gemm16_q8_0 = gemm16Q0<Q0Kind::kQ8_0>;  // the 16-row Q8_0 / Q4_0 / Q5_0 layout (q0_x16.h)
    t.gemm16_q4_0 = gemm16Q0<Q0Kind::kQ4_0>;
    t.gemm16_q5_0 = gemm16Q0<Q0Kind::kQ5_0>;
    t.gemm32_q4_0 = gemm32Q4_0;
    t.unpack16_q5_0 = unpack16Q0<Q0Kind::kQ5_0>;
    t.gemm16_values_q5_0 = gemm16ValuesQ0<Q0Kind::kQ5_0>;
    t.gemm32_values_q5_0 = gemm32ValuesQ5_0;
    t.gemm16_q5_1 = gemm16Q5_1;
    t.gemv16_q8_0 = gemv16Q0<Q0Kind::kQ8_0>;  // decode on the same layouts
    t.gemv16_q4_0 = gemv16Q0<Q0Kind::kQ4_0>;
    // Q4_0 decode on AMD Zen 4 (the CPUs of the near-and-far prefetch): the 256-bit kernel of the
    // AVX2 table, the same layout and bits, read the weights faster at one thread (llama-0.9b
    // Q4_0, tools/kernel_bench --model --isas avx2,avx512: 27.7-29.5 against 26.9-27.0 GB/s, plain
    // loads 29.3-30.1; tpnode --threads 1 decode 54.8-58.1 against 51.2-56.0 tokens/s, binaries
    // alternating), level at two threads. The AVX-512 Q5_0 kernel stays (32.0-32.2 against
    // 21.9-22.1 GB/s), and so does Q4_K's: with the paced block prefetch (decode_prefetch.h) it
    // reads llama-0.9b Q4_K_M at the rate of plain loads (32.1-32.6 GB/s, plain 31.5-32.7; the
    // AVX2 one 30.3-31.4).
    if (cpuDecodePrefetch() == DecodePrefetch::kNearAndFar) {
      if (const DotKernels* avx2 = avx2Kernels()) t.gemv16_q4_0 = avx2->gemv16_q4_0;
    }
    t.gemv16_q5_0 = gemv16Q0<Q0Kind::kQ5_0>;
    t.gemv16_q4_k = gemv16Q4K;
    t.gemv16_q6_k = gemv16Q6K;
    // BF16 prefill through vdpbf16ps; without AVX512_BF16 one dot product per row and token
    // (the 512-bit FMA tile of dot_x86_f16.inc is not tested on such a CPU, so not used).
    t.gemm_rows_bf16 = avx512Bf16RowsTile();
    return t;
  }();
  return k;
}

Gemv16Fn avx512OwnGemv16(TensorType type) {
  if (!avx512Kernels()) return nullptr;
  if (type == TensorType::kQ4_0) return gemv16Q0<Q0Kind::kQ4_0>;
  if (type == TensorType::kQ4_K) return gemv16Q4K;
  return avx512Table().gemv16ForType(type);
}

const DotKernels* avx512AmxTable() {
  static const DotKernels* k = []() -> const DotKernels* {
    static DotKernels t = avx512Table();
    t.isa = "avx512-amx";
    t.unpack16_q4_k_amx = amxQ4KUnpack();
    t.gemm16_values_q4_k_amx = amxQ4KValuesTile();
    return t.gemm16_values_q4_k_amx ? &t : nullptr;
  }();
  return k;
}

}  // namespace tpnode::model::kernels
