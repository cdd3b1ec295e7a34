// The scaling step of the 16-row Q4_K prefill tiles (q4k_x16.h), per super-block and token: the
// row scales d and dmin, the 6-bit mins against the token's Q8_K sums of 32, and the order of the
// float operations. Shared by the AVX-512 tiles (dot_x86_q4k_x16.inc) and the AMX one
// (q4k_amx.cc), so that given the same integer sums both give the same bits. Only for sources
// compiled with AVX-512 F/BW/VL + VNNI and F16C; internal to each of them.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "model/kernels/cpu/blocks.h"
#include "model/kernels/cpu/q4k_x16.h"

namespace tpnode::model::kernels {
namespace {  // each includer gets its own copy, compiled with its own target flags

// acc + vpdpwssd(a, the i32 at p broadcast to every lane), the broadcast as the memory operand.
inline __attribute__((always_inline)) __m512i dpwssdBcast(__m512i acc, __m512i a,
                                                          const int32_t* p) {
  __asm__("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(a), "m"(*p));
  return acc;
}

// A group's per-row values of one super-block: the mins as i16, d and dmin as floats.
struct Q4KRowScales {
  __m512i mins[4];  // mins[q]: the row's (min 2q, min 2q + 1), one i32 lane per row
  __m512 dx, dm;
};

inline __attribute__((always_inline)) Q4KRowScales q4kRowScales(const BlockQ4Kx16& xb) {
  Q4KRowScales s;
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    s.mins[q] =
        _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.mins[q])));
  }
  s.dx = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.d)));
  s.dm = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.dmin)));
  return s;
}

// acc + d x sumi / 16 - dmin x (mins . the Q8_K sums of 32 of y), per row (lane); sumi is 16
// times the super-block's integer sum of scale x (activation . nibble). The sums of 32 come from
// vpmaddwd + vpackssdw, go to memory and reach vpdpwssd as broadcast memory operands.
inline __attribute__((always_inline)) __m512 q4kAddTokenBlock(const Q4KRowScales& s,
                                                              const BlockQ8K& y, __m512i sumi,
                                                              __m512 acc) {
  // Sums of 32 as i32 (|sum| <= 4096), packed to i16: words 0, 1, 4, 5 are the pairs
  // (sub-block 2q, 2q + 1) for q = 0, 1, 2, 3.
  const __m256i s32 = _mm256_madd_epi16(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.bsums)), _mm256_set1_epi16(1));
  alignas(32) int32_t words[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(words), _mm256_packs_epi32(s32, s32));
  __m512i summ = _mm512_setzero_si512();
  summ = dpwssdBcast(summ, s.mins[0], &words[0]);
  summ = dpwssdBcast(summ, s.mins[1], &words[1]);
  summ = dpwssdBcast(summ, s.mins[2], &words[4]);
  summ = dpwssdBcast(summ, s.mins[3], &words[5]);
  const __m512 dy = _mm512_set1_ps(y.d);
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi),
                        _mm512_mul_ps(s.dx, _mm512_mul_ps(dy, _mm512_set1_ps(1.0f / 16))), acc);
  return _mm512_fnmadd_ps(_mm512_cvtepi32_ps(summ), _mm512_mul_ps(s.dm, dy), acc);
}

}  // namespace
}  // namespace tpnode::model::kernels
