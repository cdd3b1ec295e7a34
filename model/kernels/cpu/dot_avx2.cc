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

namespace tpnode::model::kernels {

const DotKernels& avx2Table() {
  static const DotKernels k = [] {
    DotKernels t = x86Table("avx2");
    // Q4_0 / Q5_0 on the 16-row layout (q0_x16.h), 8 rows per 256-bit vector.
    t.gemm16_q4_0 = gemm16Q0Avx2<Q0Avx2Kind::kQ4_0>;
    t.gemm16_q5_0 = gemm16Q0Avx2<Q0Avx2Kind::kQ5_0>;
    t.gemv16_q4_0 = gemv16Q0Avx2<Q0Avx2Kind::kQ4_0>;
    t.gemv16_q5_0 = gemv16Q0Avx2<Q0Avx2Kind::kQ5_0>;
    // Q4_K on the 16-row layout (q4k_x16.h), 8 rows per 256-bit vector.
    t.x16_q4_k = dot16Q4KAvx2;
    t.gemm16_q4_k = gemm16Q4KAvx2;
    t.unpack16_q4_k = unpack16Q4KAvx2;
    t.gemm16_values_q4_k = gemm16ValuesQ4KAvx2;
    t.gemv16_q4_k = gemv16Q4KAvx2;
    t.gemm16_q6_k = gemm16Q6KAvx2;  // Q6_K likewise (q6k_x16.h)
    t.unpack16_q6_k = unpack16Q6KAvx2;
    t.gemm16_values_q6_k = gemm16ValuesQ6KAvx2;
    t.gemv16_q6_k = gemv16Q6KAvx2;
    return t;
  }();
  return k;
}

}  // namespace tpnode::model::kernels
