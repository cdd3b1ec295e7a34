// AVX2 + FMA + F16C + AVX-VNNI dot products: the AVX2 kernels with the VEX vpdpbusd in place of
// maddubs + madd wherever they multiply bytes (Q8_0, Q4_0, Q5_0, Q5_1) and vpdpwssd in place of
// madd + add where the K-quants scale their i16 products (Q4_K, Q6_K). Compiled with those flags;
// picked when the CPU has AVX-VNNI but not the AVX-512 set (or TPNODE_CPU_ISA=avx2vnni).
#define TP_X86_VNNI 1
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

const DotKernels& avx2VnniTable() {
  static const DotKernels k = x86Table256("avx2-vnni");
  return k;
}

}  // namespace tpnode::model::kernels
