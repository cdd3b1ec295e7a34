#include "model/kernels/cpu/gelu.h"

#include <cmath>
#include <memory>
#include <string_view>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "model/kernels/cpu/blocks.h"
#include "model/kernels/cpu/dot.h"

namespace tpnode::model::kernels {
namespace {

// f16 bits -> f16 bits of gelu, for all 65536 halves (ggml_table_gelu_f16), plus one padding
// entry: the AVX2 lookup reads 4 bytes from entry i's address.
const uint16_t* geluTable() {
  static const std::unique_ptr<uint16_t[]> table = [] {
    auto t = std::make_unique<uint16_t[]>(65537);
    for (uint32_t i = 0; i < 65536; ++i) {
      t[i] = f32ToFp16(geluTanh(fp16ToF32(static_cast<uint16_t>(i))));
    }
    t[65536] = 0;
    return t;
  }();
  return table.get();
}

inline float gegluOne(const uint16_t* table, float g, float u) {
  if (g <= -10.0f) return 0.0f;
  if (g >= 10.0f) return g * u;
  return fp16ToF32(table[f32ToFp16(g)]) * u;
}

#if defined(__x86_64__)
// 8 values per step: vcvtps2ph rounds to nearest even as f32ToFp16 (and ggml's _cvtss_sh) do,
// the table is read with a gather, vcvtph2ps widens exactly; the same multiplies and cut-offs.
__attribute__((target("avx2,fma,f16c"))) void gegluAvx2Impl(float* g, const float* u, int64_t n) {
  const uint16_t* table = geluTable();
  const __m256 lo = _mm256_set1_ps(-10.0f), hi = _mm256_set1_ps(10.0f);
  // Bytes 0-1, 4-5, 8-9, 12-13 of each 128-bit half to its low 8 bytes.
  const __m256i low16 = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1,
                                         0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 gv = _mm256_loadu_ps(g + i);
    const __m256 uv = _mm256_loadu_ps(u + i);
    const __m256i idx = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(gv, _MM_FROUND_TO_NEAREST_INT));
    const __m256i t = _mm256_shuffle_epi8(
        _mm256_i32gather_epi32(reinterpret_cast<const int*>(table), idx, 2), low16);
    const __m128i h = _mm256_castsi256_si128(_mm256_permute4x64_epi64(t, 0x08));  // qwords 0, 2
    __m256 r = _mm256_mul_ps(_mm256_cvtph_ps(h), uv);
    r = _mm256_blendv_ps(r, _mm256_mul_ps(gv, uv), _mm256_cmp_ps(gv, hi, _CMP_GE_OQ));
    r = _mm256_andnot_ps(_mm256_cmp_ps(gv, lo, _CMP_LE_OQ), r);
    _mm256_storeu_ps(g + i, r);
  }
  for (; i < n; ++i) g[i] = gegluOne(table, g[i], u[i]);
}

// GCC 12's AVX-512 intrinsics trip this warning on their own undefined pass-through operands (as
// in ggml_math_avx512.cc).
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// 16 values per step, as gegluAvx2Impl: the same rounding to f16, a 16-lane gather of the table
// (4 bytes read at each entry, the low half kept), the same multiplies and cut-offs.
__attribute__((target("avx512f"))) void gegluAvx512Impl(float* g, const float* u, int64_t n) {
  const uint16_t* table = geluTable();
  const __m512 lo = _mm512_set1_ps(-10.0f), hi = _mm512_set1_ps(10.0f);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 gv = _mm512_loadu_ps(g + i);
    const __m512 uv = _mm512_loadu_ps(u + i);
    const __m512i idx = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(gv, _MM_FROUND_TO_NEAREST_INT));
    const __m512i t = _mm512_i32gather_epi32(idx, reinterpret_cast<const int*>(table), 2);
    __m512 r = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(t)), uv);
    r = _mm512_mask_mul_ps(r, _mm512_cmp_ps_mask(gv, hi, _CMP_GE_OQ), gv, uv);
    r = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(gv, lo, _CMP_NLE_UQ), r);
    _mm512_storeu_ps(g + i, r);
  }
  for (; i < n; ++i) g[i] = gegluOne(table, g[i], u[i]);
}
#pragma GCC diagnostic pop
#endif

}  // namespace

float geluTanh(float x) {
  constexpr float kA = 0.044715f;
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kA * x * x)));
}

void gegluScalar(float* g, const float* u, int64_t n) {
  const uint16_t* table = geluTable();
  for (int64_t i = 0; i < n; ++i) g[i] = gegluOne(table, g[i], u[i]);
}

GegluFn gegluAvx2() {
#if defined(__x86_64__)
  if (avx2Kernels()) return gegluAvx2Impl;
#endif
  return nullptr;
}

GegluFn gegluAvx512() {
#if defined(__x86_64__)
  if (avx512Kernels()) return gegluAvx512Impl;
#endif
  return nullptr;
}

namespace {

GegluFn chosenGeglu() {
  static const GegluFn fn = [] {
    const std::string_view isa = bestKernels().isa;
    if (isa == "scalar") return gegluScalar;
    const GegluFn wide = isa.starts_with("avx512") ? gegluAvx512() : nullptr;
    const GegluFn simd = wide ? wide : gegluAvx2();
    return simd ? simd : gegluScalar;
  }();
  return fn;
}

}  // namespace

void gegluPrepare() {
  geluTable();
  chosenGeglu();
}

void geglu(float* g, const float* u, int64_t n) {
  chosenGeglu()(g, u, n);
}

}  // namespace tpnode::model::kernels
