// AVX2 + FMA + F16C dot products (compiled with those flags; called only when the CPU has them).
#define TP_X86_VNNI 0
#define TP_X86_AVX512 0
#include "model/kernels/cpu/dot_x86.inc"
#include "model/kernels/cpu/dot_x86_f16.inc"
#include "model/kernels/cpu/dot_x86_q0_x16_avx2.inc"
#include "model/kernels/cpu/dot_x86_q4k_x16_avx2.inc"
#include "model/kernels/cpu/dot_x86_q5.inc"
#include "model/kernels/cpu/dot_x86_q6k_x16_avx2.inc"
#include "model/kernels/cpu/dot_x86_table.inc"
#include "model/kernels/cpu/dot_x86_table_256.inc"

namespace tpnode::model::kernels {

const DotKernels& avx2Table() {
  static const DotKernels k = x86Table256("avx2");
  return k;
}

}  // namespace tpnode::model::kernels
