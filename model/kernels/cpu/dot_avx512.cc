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
#include "model/kernels/cpu/dot_x86_quantize512.inc"
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
    t.quantize_q8_0 = quantizeQ8_0Avx512;  // activations: 512-bit quantizers, the same bytes
    t.quantize_q8_k = quantizeQ8KAvx512;
    t.gemv16_q8_0 = gemv16Q0<Q0Kind::kQ8_0>;  // decode on the same layouts
    t.gemv16_q4_0 = gemv16Q0<Q0Kind::kQ4_0>;
    // With their paced prefetch (decode_prefetch.h) the AVX-512 Q4_0 and Q4_K decodes read at
    // about the rate of plain loads on AMD EPYC Zen 4 (llama-0.9b Q4_0 and Q4_K_M, kernel_bench
    // --model --isas avx2,avx512 --layouts auto,read: 0.97-1.05x and 1.00-1.02x), the AVX2
    // table's at 0.94-0.98x and 0.94-0.96x; tpnode --threads 1 Q4_0 decode 51.4-60.0 against
    // 48.1-60.1 tokens/s with the AVX2 kernel (12 alternations, means 56.7 / 54.9).
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
