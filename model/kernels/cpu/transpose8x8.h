// Two shuffle stages of an 8 x 8 float transpose in AVX registers, shared by the kernels that
// turn rows into columns (transpose.cc's tiles, ops.cc's sums of squares). x86 only.
#pragma once

#include <immintrin.h>

namespace tpnode::model::kernels {

// For 8 row vectors r: u[4h + j] holds column j of rows 4h..4h+3 in its low 4 lanes and column
// j + 4 in its high 4 (h < 2, j < 4); _mm256_permute2f128_ps(u[j], u[4 + j], 0x20) is then the
// whole column j and (..., 0x31) column j + 4.
__attribute__((target("avx"), always_inline)) inline void transpose8x8Halves(const __m256* r,
                                                                             __m256* u) {
  __m256 t[8];  // pairs of rows interleaved
  for (int k = 0; k < 4; ++k) {
    t[2 * k] = _mm256_unpacklo_ps(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm256_unpackhi_ps(r[2 * k], r[2 * k + 1]);
  }
  for (int h = 0; h < 2; ++h) {  // rows 0-3, rows 4-7
    const __m256* th = t + 4 * h;
    u[4 * h + 0] = _mm256_shuffle_ps(th[0], th[2], 0x44);  // columns 0, 4
    u[4 * h + 1] = _mm256_shuffle_ps(th[0], th[2], 0xEE);  // 1, 5
    u[4 * h + 2] = _mm256_shuffle_ps(th[1], th[3], 0x44);  // 2, 6
    u[4 * h + 3] = _mm256_shuffle_ps(th[1], th[3], 0xEE);  // 3, 7
  }
}

}  // namespace tpnode::model::kernels
