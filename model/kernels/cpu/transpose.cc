#include "model/kernels/cpu/transpose.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tpnode::model::kernels {
namespace {

// Rows [r0, r1) x columns [c0, c1), element by element.
void transposeScalar(const float* src, int64_t src_stride, int64_t r0, int64_t r1, int64_t c0,
                     int64_t c1, float* dst, int64_t dst_stride) {
  for (int64_t c = c0; c < c1; ++c) {
    for (int64_t r = r0; r < r1; ++r) dst[c * dst_stride + r] = src[r * src_stride + c];
  }
}

#if defined(__x86_64__)
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

// Whole 8 x 8 tiles: 8 row loads, 24 shuffles (transpose8x8Halves and one permute per column),
// 8 column stores; the rest element by element.
__attribute__((target("avx"))) void transposeAvx(const float* src, int64_t src_stride, int64_t rows,
                                                 int64_t cols, float* dst, int64_t dst_stride) {
  const int64_t rows8 = rows & ~int64_t{7}, cols8 = cols & ~int64_t{7};
  for (int64_t r0 = 0; r0 < rows8; r0 += 8) {
    for (int64_t c0 = 0; c0 < cols8; c0 += 8) {
      __m256 x[8];
      for (int i = 0; i < 8; ++i) x[i] = _mm256_loadu_ps(src + (r0 + i) * src_stride + c0);
      __m256 u[8];
      transpose8x8Halves(x, u);
      for (int i = 0; i < 4; ++i) {
        _mm256_storeu_ps(dst + (c0 + i) * dst_stride + r0,
                         _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
        _mm256_storeu_ps(dst + (c0 + i + 4) * dst_stride + r0,
                         _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
      }
    }
    transposeScalar(src, src_stride, r0, r0 + 8, cols8, cols, dst, dst_stride);
  }
  transposeScalar(src, src_stride, rows8, rows, 0, cols, dst, dst_stride);
}
#endif

}  // namespace

void transposeFloats(const float* src, int64_t src_stride, int64_t rows, int64_t cols, float* dst,
                     int64_t dst_stride) {
#if defined(__x86_64__)
  static const bool avx = __builtin_cpu_supports("avx");
  if (avx) {
    transposeAvx(src, src_stride, rows, cols, dst, dst_stride);
    return;
  }
#endif
  transposeScalar(src, src_stride, 0, rows, 0, cols, dst, dst_stride);
}

}  // namespace tpnode::model::kernels
