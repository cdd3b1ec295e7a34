#include "model/kernels/cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <vector>

#include "model/kernels/cpu/dot.h"
#include "model/kernels/cpu/ggml_math.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "model/kernels/cpu/transpose8x8.h"
#endif

namespace tpnode::model::kernels {

namespace {

// Row r's sum of squares in rmsNorm's order: each value squared in float, widened to double and
// added one by one in column order.
inline __attribute__((always_inline)) void sumSquaresRow(const float* x, int64_t n, double& sum) {
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
}

// y = x * scale, then y *= w (rmsNorm's two roundings), for one row.
inline __attribute__((always_inline)) void scaleRow(const float* x, const float* w, float* y,
                                                    int64_t n, float scale) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  if (w) {
    for (int64_t i = 0; i < n; ++i) y[i] *= w[i];
  }
}

float normScale(double sum, int64_t n, float eps) {
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  return 1.0f / std::sqrt(mean + eps);
}

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC diagnostic push
#if !defined(__clang__)  // GCC 12 flags _mm512_cvtps_pd's undefined source vector
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// The squares of 8 rows x 8 columns (rows n floats apart, columns i..i+7) in float, transposed so
// that u[4h + j] holds column j of rows 4h..4h+3 in its low 4 lanes and column j + 4 in its high 4
// (transpose8x8Halves). Of fewer than 8 rows (`rows`), the last is read again in the lanes past it.
__attribute__((target("avx2"), always_inline)) inline void squares8x8(const float* x, int64_t n,
                                                                      int rows, int64_t i,
                                                                      __m256* u) {
  __m256 r[8];
  for (int k = 0; k < 8; ++k) {
    const __m256 v = _mm256_loadu_ps(x + std::min(k, rows - 1) * n + i);
    r[k] = _mm256_mul_ps(v, v);
  }
  transpose8x8Halves(r, u);
}

// 8 rows' sums of squares (rows n floats apart), one row per double lane: 8 columns at a time
// are squared in float, turned from 8 rows x 8 columns into 8 columns x 8 rows (squares8x8) and
// each column widened to double and added, so every lane adds its row's squares in column order,
// as sumSquaresRow does; the columns past the last 8 are added after them. `rows` (1..8) rows are
// read; sum[r] for r >= rows is left as it is.
__attribute__((target("avx512f"))) void sumSquares8Avx512(const float* x, int64_t n, int rows,
                                                          double* sum) {
  __m512d acc = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 u[8];
    squares8x8(x, n, rows, i, u);
    for (int j = 0; j < 4; ++j) {
      acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm256_permute2f128_ps(u[j], u[4 + j], 0x20)));
    }
    for (int j = 0; j < 4; ++j) {
      acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm256_permute2f128_ps(u[j], u[4 + j], 0x31)));
    }
  }
  double lanes[8];
  _mm512_storeu_pd(lanes, acc);
  for (int r = 0; r < rows; ++r) {
    sum[r] = lanes[r];
    sumSquaresRow(x + r * n + i, n - i, sum[r]);
  }
}

// sumSquares8Avx512 with 256-bit vectors: rows 0-3 in one accumulator of 4 double lanes, rows
// 4-7 in another, each adding its columns in the same order.
__attribute__((target("avx2"))) void sumSquares8Avx2(const float* x, int64_t n, int rows,
                                                     double* sum) {
  __m256d acc[2] = {_mm256_setzero_pd(), _mm256_setzero_pd()};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 u[8];
    squares8x8(x, n, rows, i, u);
    for (int h = 0; h < 2; ++h) {
      for (int j = 0; j < 4; ++j) {
        acc[h] = _mm256_add_pd(acc[h], _mm256_cvtps_pd(_mm256_castps256_ps128(u[4 * h + j])));
      }
      for (int j = 0; j < 4; ++j) {
        acc[h] = _mm256_add_pd(acc[h], _mm256_cvtps_pd(_mm256_extractf128_ps(u[4 * h + j], 1)));
      }
    }
  }
  double lanes[8];
  _mm256_storeu_pd(lanes, acc[0]);
  _mm256_storeu_pd(lanes + 4, acc[1]);
  for (int r = 0; r < rows; ++r) {
    sum[r] = lanes[r];
    sumSquaresRow(x + r * n + i, n - i, sum[r]);
  }
}

// scaleRow 16 values at a time: (x * scale) rounded, then times w, as its two passes.
__attribute__((target("avx512f"))) void scaleRowAvx512(const float* x, const float* w, float* y,
                                                       int64_t n, float scale) {
  const __m512 s = _mm512_set1_ps(scale);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + i), s);
    if (w) v = _mm512_mul_ps(v, _mm512_loadu_ps(w + i));
    _mm512_storeu_ps(y + i, v);
  }
  scaleRow(x + i, w ? w + i : nullptr, y + i, n - i, scale);
}

// scaleRow 8 values at a time.
__attribute__((target("avx2"))) void scaleRowAvx2(const float* x, const float* w, float* y,
                                                  int64_t n, float scale) {
  const __m256 s = _mm256_set1_ps(scale);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), s);
    if (w) v = _mm256_mul_ps(v, _mm256_loadu_ps(w + i));
    _mm256_storeu_ps(y + i, v);
  }
  scaleRow(x + i, w ? w + i : nullptr, y + i, n - i, scale);
}

// rmsNormRows with 8 rows' sums of squares at a time (kSums8; the last 2-7 rows in one call too,
// as a pool's chunk of a few tokens has them) and their rows scaled by kScale.
template <void (*kSums8)(const float*, int64_t, int, double*),
          void (*kScale)(const float*, const float*, float*, int64_t, float)>
void rmsNormRows8(const float* x, const float* w, float* y, int64_t n, int64_t rows, float eps) {
  static_assert(kNormRowsPerPass == 8, "kSums8 sums 8 rows, one per double lane of 512 bits");
  for (int64_t r0 = 0; r0 < rows; r0 += kNormRowsPerPass) {
    const int k = static_cast<int>(std::min(kNormRowsPerPass, rows - r0));
    if (k == 1) {
      rmsNorm(x + r0 * n, w, y + r0 * n, n, eps);
      break;
    }
    double sum[8];
    kSums8(x + r0 * n, n, k, sum);
    for (int r = 0; r < k; ++r) {
      kScale(x + (r0 + r) * n, w, y + (r0 + r) * n, n, normScale(sum[r], n, eps));
    }
  }
}
#pragma GCC diagnostic pop
#endif

}  // namespace

void rmsNorm(const float* x, const float* w, float* y, int64_t n, float eps) {
  double sum = 0;
  sumSquaresRow(x, n, sum);
  scaleRow(x, w, y, n, normScale(sum, n, eps));
}

void rmsNormRowsBaseline(const float* x, const float* w, float* y, int64_t n, int64_t rows,
                         float eps) {
  constexpr int kRows = 8;
  int64_t r0 = 0;
  for (; r0 + kRows <= rows; r0 += kRows) {
    const float* xr = x + r0 * n;
    double sum[kRows] = {};
    for (int64_t i = 0; i < n; ++i) {
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) {
        const float v = xr[r * n + i];
        sum[r] += static_cast<double>(v * v);
      }
    }
    for (int r = 0; r < kRows; ++r) {
      scaleRow(xr + r * n, w, y + (r0 + r) * n, n, normScale(sum[r], n, eps));
    }
  }
  for (; r0 < rows; ++r0) rmsNorm(x + r0 * n, w, y + r0 * n, n, eps);
}

void rmsNormRows(const float* x, const float* w, float* y, int64_t n, int64_t rows, float eps) {
#if defined(__x86_64__) && defined(__GNUC__)
  // Follows the dot kernels' choice (TPNODE_CPU_ISA=scalar selects the baseline code).
  static const std::string_view isa = bestKernels().isa;
  if (isa.starts_with("avx512")) {
    rmsNormRows8<sumSquares8Avx512, scaleRowAvx512>(x, w, y, n, rows, eps);
    return;
  }
  if (isa.starts_with("avx2")) {  // avx2, avx2vnni
    rmsNormRows8<sumSquares8Avx2, scaleRowAvx2>(x, w, y, n, rows, eps);
    return;
  }
#endif
  rmsNormRowsBaseline(x, w, y, n, rows, eps);
}

void ropeAngles(int64_t n_rot, int64_t pos, float base, float freq_scale, const float* freq_factors,
                float* cs) {
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_rot));
  float theta = static_cast<float>(pos);
  for (int64_t i0 = 0; i0 < n_rot; i0 += 2) {
    const float ff = freq_factors ? freq_factors[i0 / 2] : 1.0f;
    const float t = freq_scale * (theta / ff);
    cs[i0] = std::cos(t);
    cs[i0 + 1] = std::sin(t);
    theta *= theta_scale;
  }
}

namespace {

// The rotations of pairs i0 / 2 onwards (i0 = first, first + 2, ...; first even).
inline void ropeRotateImpl(float* v, int64_t n_rot, RopeStyle style, const float* cs,
                           int64_t first = 0) {
  for (int64_t i0 = first; i0 < n_rot; i0 += 2) {
    const float c = cs[i0], s = cs[i0 + 1];
    const int64_t a = style == RopeStyle::kNormal ? i0 : i0 / 2;
    const int64_t b = style == RopeStyle::kNormal ? i0 + 1 : i0 / 2 + n_rot / 2;
    const float x0 = v[a], x1 = v[b];
    // ggml's rotate_pairs as GCC -O3 -mfma contracts it (measured: Q and K bit-identical).
    v[a] = std::fma(x0, c, -(x1 * s));
    v[b] = std::fma(x0, s, x1 * c);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
// The same operations with std::fma as one instruction: in the baseline build it is a call to
// libm's fmaf per value (the same correctly rounded result, several times the cost).
__attribute__((target("fma"))) void ropeRotateFma(float* v, int64_t n_rot, RopeStyle style,
                                                  const float* cs) {
  ropeRotateImpl(v, n_rot, style, cs);
}

// GCC 12's AVX-512 intrinsics trip this warning on their undefined pass-through operands.
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// -x, exactly (the sign bit flipped, as the scalar code's negation: 0 - x would turn -0 into +0).
__attribute__((target("avx512f"))) inline __m512 negate(__m512 x) {
  return _mm512_castsi512_ps(
      _mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32(static_cast<int>(0x80000000u))));
}

// ropeRotateImpl 8 (normal) or 16 (NeoX) pairs at a time, each value by the same multiply,
// negation and fused multiply-add; the pairs past the last whole vector by ropeRotateImpl's loop.
__attribute__((target("avx512f,fma"))) void ropeRotateAvx512(float* v, int64_t n_rot,
                                                             RopeStyle style, const float* cs) {
  int64_t done = 0;  // normal style: the values rotated so far (2 per pair)
  if (style == RopeStyle::kNormal) {
    // Pairs side by side: x = (x0, x1, ...), its pairs swapped xs = (x1, x0, ...), cs = (c, s,
    // ...).
    for (; done + 16 <= n_rot; done += 16) {
      const __m512 x = _mm512_loadu_ps(v + done);
      const __m512 t = _mm512_loadu_ps(cs + done);
      const __m512 c = _mm512_moveldup_ps(t), s = _mm512_movehdup_ps(t);
      const __m512 xs = _mm512_permute_ps(x, 0xB1);
      const __m512 first =
          _mm512_fmadd_ps(x, c, negate(_mm512_mul_ps(xs, s)));            // fma(x0, c, -(x1 s))
      const __m512 second = _mm512_fmadd_ps(xs, s, _mm512_mul_ps(x, c));  // fma(x0, s, x1 c)
      _mm512_storeu_ps(v + done, _mm512_mask_blend_ps(0xAAAA, first, second));
    }
    ropeRotateImpl(v, n_rot, style, cs, done);
    return;
  }
  // NeoX: pair j is (v[j], v[j + n_rot / 2]), its cos and sin at cs[2j], cs[2j + 1].
  const int64_t half = n_rot / 2;
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  int64_t j = 0;
  for (; j + 16 <= half; j += 16) {
    const __m512 t0 = _mm512_loadu_ps(cs + 2 * j), t1 = _mm512_loadu_ps(cs + 2 * j + 16);
    const __m512 c = _mm512_permutex2var_ps(t0, even, t1);
    const __m512 s = _mm512_permutex2var_ps(t0, odd, t1);
    const __m512 x0 = _mm512_loadu_ps(v + j), x1 = _mm512_loadu_ps(v + half + j);
    _mm512_storeu_ps(v + j, _mm512_fmadd_ps(x0, c, negate(_mm512_mul_ps(x1, s))));
    _mm512_storeu_ps(v + half + j, _mm512_fmadd_ps(x0, s, _mm512_mul_ps(x1, c)));
  }
  ropeRotateImpl(v, n_rot, style, cs, 2 * j);
}
#pragma GCC diagnostic pop
#endif

}  // namespace

void ropeRotateBaseline(float* v, int64_t n_rot, RopeStyle style, const float* cs) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool has_fma = __builtin_cpu_supports("fma");
  if (has_fma) {
    ropeRotateFma(v, n_rot, style, cs);
    return;
  }
#endif
  ropeRotateImpl(v, n_rot, style, cs);
}

void ropeRotate(float* v, int64_t n_rot, RopeStyle style, const float* cs) {
#if defined(__x86_64__) && defined(__GNUC__)
  // Follows the dot kernels' choice, as rmsNormRows.
  static const bool avx512 = bestKernels().isa.starts_with("avx512");
  if (avx512) {
    ropeRotateAvx512(v, n_rot, style, cs);
    return;
  }
#endif
  ropeRotateBaseline(v, n_rot, style, cs);
}

void rope(float* v, int64_t n_rot, int64_t pos, float base, float freq_scale, RopeStyle style,
          const float* freq_factors) {
  std::vector<float> cs(static_cast<size_t>(n_rot));
  ropeAngles(n_rot, pos, base, freq_scale, freq_factors, cs.data());
  ropeRotate(v, n_rot, style, cs.data());
}

void softmax(float* x, int64_t n) {
  ggml::softmax(x, n);
}

void swiglu(float* g, const float* u, int64_t n) {
  ggml::swiglu(g, u, n);
}

}  // namespace tpnode::model::kernels
