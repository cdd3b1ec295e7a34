#include "model/kernels/cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string_view>
#include <vector>

#include "model/kernels/cpu/dot.h"
#include "model/kernels/cpu/ggml_math.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

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

// rmsNorm's mean of squares from its double sum, and the row's scale from the mean.
float meanOf(double sum, int64_t n) {
  return static_cast<float>(sum / static_cast<double>(n));
}
float scaleOf(float mean, float eps) {
  return 1.0f / std::sqrt(mean + eps);
}

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC diagnostic push
#if !defined(__clang__)  // GCC 12 flags the undefined pass-through vectors of its intrinsics
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
// Adds the squares of x[0..15] (each rounded to float, as rmsNorm's), widened to double, into
// lo (the first 8) and hi (the last 8).
__attribute__((target("avx512f"), always_inline)) inline void addSquares16(const float* x,
                                                                           __m512d& lo,
                                                                           __m512d& hi) {
  const __m512 v = _mm512_loadu_ps(x);
  const __m512d sq = _mm512_castps_pd(_mm512_mul_ps(v, v));
  lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_castpd512_pd256(sq))));
  hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(sq, 1))));
}

// The row's squares widened to double and added in no particular order: 16 columns a step into
// 4 accumulators of 8 double lanes (two steps in flight), then the lanes, then the last n % 16
// columns.
__attribute__((target("avx512f"))) double sumSquaresAvx512(const float* x, int64_t n) {
  __m512d acc[4] = {_mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(),
                    _mm512_setzero_pd()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    addSquares16(x + i, acc[0], acc[1]);
    addSquares16(x + i + 16, acc[2], acc[3]);
  }
  if (i + 16 <= n) {
    addSquares16(x + i, acc[0], acc[1]);
    i += 16;
  }
  double sum = _mm512_reduce_add_pd(
      _mm512_add_pd(_mm512_add_pd(acc[0], acc[1]), _mm512_add_pd(acc[2], acc[3])));
  sumSquaresRow(x + i, n - i, sum);
  return sum;
}

// sumSquaresAvx512 with 256-bit vectors: 8 columns a step into 4 accumulators of 4 lanes.
__attribute__((target("avx2"))) double sumSquaresAvx2(const float* x, int64_t n) {
  __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(),
                    _mm256_setzero_pd()};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256 v = _mm256_loadu_ps(x + i + 8 * h);
      const __m256 sq = _mm256_mul_ps(v, v);
      acc[2 * h] = _mm256_add_pd(acc[2 * h], _mm256_cvtps_pd(_mm256_castps256_ps128(sq)));
      acc[2 * h + 1] = _mm256_add_pd(acc[2 * h + 1], _mm256_cvtps_pd(_mm256_extractf128_ps(sq, 1)));
    }
  }
  const __m256d a = _mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3]));
  double lanes[4];
  _mm256_storeu_pd(lanes, a);
  double sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  sumSquaresRow(x + i, n - i, sum);
  return sum;
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

// rmsNormRows row by row: the mean from kSum's sum in any order where that decides it
// (rmsMeanFromAnyOrderSum), else from the squares added in column order; the row scaled by kScale.
template <double (*kSum)(const float*, int64_t),
          void (*kScale)(const float*, const float*, float*, int64_t, float)>
void rmsNormRowsSimd(const float* x, const float* w, float* y, int64_t n, int64_t rows, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    std::optional<float> mean = rmsMeanFromAnyOrderSum(kSum(xr, n), n);
    if (!mean) {
      double sum = 0;
      sumSquaresRow(xr, n, sum);
      mean = meanOf(sum, n);
    }
    kScale(xr, w, y + r * n, n, scaleOf(*mean, eps));
  }
}
#pragma GCC diagnostic pop
#endif

}  // namespace

std::optional<float> rmsMeanFromAnyOrderSum(double sum, int64_t n) {
  // Any n - 1 double additions of n non-negative terms land within gamma = (n-1) u / (1 - (n-1) u)
  // of their exact sum (u = 2^-53), so rmsNorm's sum S is within [sum (1 - d), sum (1 + d)] for
  // d >= 2 gamma / (1 - gamma); d below has room for that and for rounding lo and hi themselves.
  const double d = (4.0 * static_cast<double>(n) + 8.0) * 0x1p-53;
  const double lo = sum - sum * d, hi = sum + sum * d;
  const float a = meanOf(lo, n), b = meanOf(hi, n);  // inf or NaN sums give NaN: a != b
  if (a == b) return a;
  return std::nullopt;
}

void rmsNorm(const float* x, const float* w, float* y, int64_t n, float eps) {
  double sum = 0;
  sumSquaresRow(x, n, sum);
  scaleRow(x, w, y, n, scaleOf(meanOf(sum, n), eps));
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
      scaleRow(xr + r * n, w, y + (r0 + r) * n, n, scaleOf(meanOf(sum[r], n), eps));
    }
  }
  for (; r0 < rows; ++r0) rmsNorm(x + r0 * n, w, y + r0 * n, n, eps);
}

void rmsNormRows(const float* x, const float* w, float* y, int64_t n, int64_t rows, float eps) {
#if defined(__x86_64__) && defined(__GNUC__)
  // Follows the dot kernels' choice (TPNODE_CPU_ISA=scalar selects the baseline code).
  static const std::string_view isa = bestKernels().isa;
  if (isa.starts_with("avx512")) {
    rmsNormRowsSimd<sumSquaresAvx512, scaleRowAvx512>(x, w, y, n, rows, eps);
    return;
  }
  if (isa.starts_with("avx2")) {  // avx2, avx2vnni
    rmsNormRowsSimd<sumSquaresAvx2, scaleRowAvx2>(x, w, y, n, rows, eps);
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
