// ggml_math.h on 16 lanes (AVX-512 F + DQ): the scalar functions' operations lane for lane, so
// the same bits; exp ends with _mm512_scalef_ps exactly as ggml_v_expf. Compiled with
// -mavx512f -mavx512dq -ffp-contract=off (model/CMakeLists.txt); called only when the CPU has
// both (ggml_math.cc).
#include <immintrin.h>

#include "model/kernels/cpu/ggml_math.h"
#define TP_GGML_MATH_NS avx512
#include "model/kernels/cpu/ggml_math_impl.h"

// GCC 12's AVX-512 intrinsics (_mm512_scalef_ps, _mm512_extractf32x8_ps) trip this warning on
// their own undefined pass-through operands.
#if !defined(__clang__)  // GCC only: clang has no such warning group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace tpnode::model::kernels::ggml {
namespace {

using avx512::GgmlMath;
using avx512::ScalarOps;

struct Avx512Ops {
  using V = __m512;
  static constexpr int W = 16;
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V set1(float v) { return _mm512_set1_ps(v); }
  // The first k (0-16) values at p, zeros past them (masked lanes are not read).
  static V loadFirst(const float* p, int64_t k) {
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << k) - 1), p);
  }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  // Lane-wise max; where x is NaN the lane keeps m (as std::max(m, x) does).
  static V max(V x, V m) { return _mm512_max_ps(x, m); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  // reduce16Scalar's tree: lanes i + i+8, i + i+4, then (0 + 2) + (1 + 3).
  static float reduce16(const V* v) {
    const __m256 a = _mm256_add_ps(_mm512_extractf32x8_ps(v[0], 1), _mm512_castps512_ps256(v[0]));
    const __m128 b = _mm_add_ps(_mm256_extractf128_ps(a, 1), _mm256_castps256_ps128(a));
    const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
  }
  // reduce16 of 16 vectors at once, the same tree lane for lane (each step's shuffles pair the
  // lanes that reduce16 adds: i + i+8, i + i+4, 0 + 2 and 1 + 3, then the two): lane 4m + k of
  // the result is reduce16(&v[4k + m]). 15 additions and 30 shuffles for the 16 sums.
  static V reduce16x16(const V* v) {
    V w[8];
#pragma GCC unroll 8
    for (int p = 0; p < 8; ++p) {
      w[p] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)),
                           _mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)));
    }
    V y[4];  // 128-bit lane m of y[p]: lanes i + i+4 of v[4p + m]'s 8 pair sums
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      y[p] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * p], w[2 * p + 1], _MM_SHUFFLE(3, 1, 3, 1)),
                           _mm512_shuffle_f32x4(w[2 * p], w[2 * p + 1], _MM_SHUFFLE(2, 0, 2, 0)));
    }
    V z[2];  // lane m of z[p]: (0 + 2, 1 + 3) of v[8p + m], then of v[8p + 4 + m]
#pragma GCC unroll 2
    for (int p = 0; p < 2; ++p) {
      z[p] = _mm512_add_ps(_mm512_shuffle_ps(y[2 * p], y[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)),
                           _mm512_shuffle_ps(y[2 * p], y[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)));
    }
    return _mm512_add_ps(_mm512_shuffle_ps(z[0], z[1], _MM_SHUFFLE(3, 1, 3, 1)),
                         _mm512_shuffle_ps(z[0], z[1], _MM_SHUFFLE(2, 0, 2, 0)));
  }
  // ggml_v_expf's own ending: scalef, then 0 (n <= 0) or inf where |n| > 192.
  static V expScale(V j, V n) {
    const V res = _mm512_scalef_ps(j, n);
    const __mmask16 d = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192.f), _CMP_GT_OQ);
    if (d == 0) return res;
    const V alt = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ),
                                       _mm512_set1_ps(INFINITY), _mm512_setzero_ps());
    return _mm512_mask_blend_ps(d, res, alt);
  }
};

using Avx512 = GgmlMath<Avx512Ops>;

void scoresAvx512(int64_t hd, const float* q, const float* k, size_t stride, int64_t n, float scale,
                  float* out) {
  Avx512::scores(hd, q, k, stride, n, scale, out);
}

void weightedRowSumAvx512(VSumOrder order, const float* p, const float* rows, size_t stride,
                          int64_t n, int64_t hd, float* lanes, float* out) {
  Avx512::weightedRowSum(order == VSumOrder::kVecDot64, p, rows, stride, n, hd, lanes, out);
}

void weightedRowSumHeadsAvx512(VSumOrder order, const float* p, int64_t p_stride, int64_t heads,
                               const float* rows, size_t stride, int64_t n, int64_t hd,
                               float* lanes, float* out) {
  Avx512::weightedRowSumHeads(order == VSumOrder::kVecDot64, p, p_stride, heads, rows, stride, n,
                              hd, lanes, out);
}

}  // namespace

const Impl& avx512Table() {
  static const Impl impl{"avx512",
                         scoresAvx512,
                         Avx512::softmax,
                         Avx512::swiglu,
                         weightedRowSumAvx512,
                         Avx512::scoresHeads,
                         weightedRowSumHeadsAvx512,
                         Avx512::weightedRowSumHeadsT};
  return impl;
}

}  // namespace tpnode::model::kernels::ggml
