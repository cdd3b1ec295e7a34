// ggml_math.h on 8 lanes (AVX2 + FMA): the scalar functions' operations lane for lane, so the
// same bits. Compiled with -mavx2 -mfma -ffp-contract=off (model/CMakeLists.txt); called only
// when the CPU has both (ggml_math.cc).
#include <immintrin.h>

#include "model/kernels/cpu/ggml_math.h"
#define TP_GGML_MATH_NS avx2
#include "model/kernels/cpu/ggml_math_impl.h"

namespace tpnode::model::kernels::ggml {
namespace {

using avx2::GgmlMath;
using avx2::ScalarOps;

struct Avx2Ops {
  using V = __m256;
  static constexpr int W = 8;
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V set1(float v) { return _mm256_set1_ps(v); }
  // The first k (0-8) values at p, zeros past them (masked lanes are not read).
  static V loadFirst(const float* p, int64_t k) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(k)), lane));
  }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  // Lane-wise max; where x is NaN the lane keeps m (as std::max(m, x) does).
  static V max(V x, V m) { return _mm256_max_ps(x, m); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  // reduce16Scalar's tree: lanes i + i+8, i + i+4, then (0 + 2) + (1 + 3).
  static float reduce16(const V* v) {
    const V a = _mm256_add_ps(v[1], v[0]);
    const __m128 b = _mm_add_ps(_mm256_extractf128_ps(a, 1), _mm256_castps256_ps128(a));
    const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
  }
  // j * 2^n (j the polynomial's value, 0.7 < j < 1.5): one multiply by 2^n (a normal float) while
  // every |n| <= 126. Otherwise, while no lane of n is NaN, two, with n clamped to [-192, 192]:
  // j * 2^n1 with n1 = floor(n / 2) is a normal float (exact), and its product with 2^(n - n1)
  // rounds once, to the correctly rounded j * 2^n (normal, subnormal, 0 or inf) that scalef and
  // ldexp give; lanes beyond +-192 then take ggml's range check's 0 and inf. A NaN lane sends
  // the vector through ScalarOps::expScale.
  static V expScale(V j, V n) {
    const V abs_n = _mm256_andnot_ps(_mm256_set1_ps(-0.f), n);
    const __m256i bias = _mm256_set1_epi32(127);
    if (_mm256_movemask_ps(_mm256_cmp_ps(abs_n, _mm256_set1_ps(126.f), _CMP_NLE_UQ)) == 0) {
      const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), bias), 23);
      return _mm256_mul_ps(j, _mm256_castsi256_ps(e));
    }
    if (_mm256_movemask_ps(_mm256_cmp_ps(n, n, _CMP_UNORD_Q)) == 0) {
      const V clamped =
          _mm256_min_ps(_mm256_max_ps(n, _mm256_set1_ps(-192.f)), _mm256_set1_ps(192.f));
      const __m256i ni = _mm256_cvtps_epi32(clamped);
      const __m256i n1 = _mm256_srai_epi32(ni, 1);
      const __m256i n2 = _mm256_sub_epi32(ni, n1);
      const V p1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
      const V p2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
      const V scaled = _mm256_mul_ps(_mm256_mul_ps(j, p1), p2);
      // Beyond +-192 the range check's 0 and inf (j itself is NaN where n is infinite).
      const V low = _mm256_cmp_ps(n, _mm256_set1_ps(-192.f), _CMP_LT_OQ);
      const V high = _mm256_cmp_ps(n, _mm256_set1_ps(192.f), _CMP_GT_OQ);
      return _mm256_blendv_ps(_mm256_andnot_ps(low, scaled), _mm256_set1_ps(INFINITY), high);
    }
    alignas(32) float jj[8], nn[8];
    _mm256_store_ps(jj, j);
    _mm256_store_ps(nn, n);
    for (int l = 0; l < 8; ++l) jj[l] = ScalarOps::expScale(jj[l], nn[l]);
    return _mm256_load_ps(jj);
  }
};

using Avx2 = GgmlMath<Avx2Ops>;

void scoresAvx2(int64_t hd, const float* q, const float* k, size_t stride, int64_t n, float scale,
                float* out) {
  Avx2::scores(hd, q, k, stride, n, scale, out);
}

void weightedRowSumAvx2(VSumOrder order, const float* p, const float* rows, size_t stride,
                        int64_t n, int64_t hd, float* lanes, float* out) {
  Avx2::weightedRowSum(order == VSumOrder::kVecDot64, p, rows, stride, n, hd, lanes, out);
}

void weightedRowSumHeadsAvx2(VSumOrder order, const float* p, int64_t p_stride, int64_t heads,
                             const float* rows, size_t stride, int64_t n, int64_t hd, float* lanes,
                             float* out) {
  Avx2::weightedRowSumHeads(order == VSumOrder::kVecDot64, p, p_stride, heads, rows, stride, n, hd,
                            lanes, out);
}

}  // namespace

const Impl& avx2Table() {
  static const Impl impl{"avx2",
                         scoresAvx2,
                         Avx2::softmax,
                         Avx2::swiglu,
                         weightedRowSumAvx2,
                         Avx2::scoresHeads,
                         weightedRowSumHeadsAvx2,
                         Avx2::weightedRowSumHeadsT};
  return impl;
}

}  // namespace tpnode::model::kernels::ggml
