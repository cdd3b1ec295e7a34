// AVX2 + FMA + F16C dot products (compiled with those flags; called only when the CPU has them).
#define TP_X86_VNNI 0
#include "model/kernels/cpu/dot_x86.inc"
#include "model/kernels/cpu/dot_x86_q5.inc"

namespace tpnode::model::kernels {

const DotKernels& avx2Table() {
  static const DotKernels k{.isa = "avx2",
                            .f32 = dotF32,
                            .f16 = dotF16,
                            .bf16 = dotBF16,
                            .q8_0 = dotQ8_0,
                            .q4_0 = dotQ4_0,
                            .q4_k = dotQ4K,
                            .q6_k = dotQ6K,
                            .x4_q8_0 = dot4Q8_0,
                            .x4_q4_0 = dot4Q4_0,
                            .x4_q4_k = dot4Q4K,
                            .x4_q6_k = dot4Q6K,
                            .gemm_q8_0 = gemmQ8_0,
                            .gemm_q4_k = gemmQ4K,
                            .q5_0 = dotQ5_0,
                            .q5_1 = dotQ5_1,
                            .x4_q5_0 = dot4Q5_0,
                            .gemm_q5_0 = gemmQ5_0,
                            .f32_axpy = axpyF32,
                            .quantize_q8_k = quantizeQ8K};
  return k;
}

}  // namespace tpnode::model::kernels
