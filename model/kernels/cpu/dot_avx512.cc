// AVX-512 (F, BW, VL, VNNI) dot products (compiled with those flags; called only when the CPU
// has them).
#define TP_X86_VNNI 1
#include "model/kernels/cpu/dot_x86.inc"
#include "model/kernels/cpu/dot_x86_q5.inc"

namespace tpnode::model::kernels {

const DotKernels& avx512Table() {
  static const DotKernels k{"avx512-vnni", dotF32,  dotF16,   dotBF16,  dotQ8_0,  dotQ4_0,
                            dotQ4K,        dotQ6K,  dot4Q8_0, dot4Q4_0, dot4Q4K,  dot4Q6K,
                            gemmQ8_0,      gemmQ4K, dotQ5_0,  dotQ5_1,  dot4Q5_0, gemmQ5_0};
  return k;
}

}  // namespace tpnode::model::kernels
