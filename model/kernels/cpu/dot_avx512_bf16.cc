// BF16 prefill tiles (GemmRowsFn) with AVX-512 BF16's vdpbf16ps, compiled with that flag and
// called only when the CPU has it (avx512Bf16RowsTile). Each instruction multiplies 32 pairs of
// BF16 weights and activations exactly and adds them into 16 float lanes (pair by pair, round to
// nearest even, denormals flushed); per row and token one accumulator runs over the columns in
// order, then one horizontal sum: the order of llama.cpp's tinyBLAS with AVX512_BF16.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "model/kernels/cpu/blocks.h"
#include "model/kernels/cpu/dot.h"

// gcc 12's 512-bit intrinsics start from _mm512_undefined_*() / _mm256_undefined_*(), which
// -W(maybe-)uninitialized reports once inlined; the value is never read.
#pragma GCC diagnostic push
#if !defined(__clang__)  // GCC only: clang has no such warning group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace tpnode::model::kernels {
namespace {

constexpr int kPairs = 32;  // BF16 values per vdpbf16ps

// The 16 lanes summed in _mm512_reduce_add_ps's order: halves of 8, then of 4, then (0 + 2) +
// (1 + 3).
inline float hsum16(__m512 x) {
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(x),
                                 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
  __m128 r = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

template <int NR, int NT>
void bf16RowsTile(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* acts,
                  size_t act_stride, float* out, int64_t out_stride) {
  const uint16_t* x[NR];
  const uint16_t* y[NT];
  for (int r = 0; r < NR; ++r) x[r] = reinterpret_cast<const uint16_t*>(w + r * w_stride);
  for (int t = 0; t < NT; ++t) y[t] = reinterpret_cast<const uint16_t*>(acts + t * act_stride);
  __m512 acc[NR][NT];
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r) {
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  int64_t i = 0;
  for (; i + kPairs <= n; i += kPairs) {
    __m512bh wv[NR];
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) wv[r] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(x[r] + i));
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      const __m512bh a = reinterpret_cast<__m512bh>(_mm512_loadu_si512(y[t] + i));
#pragma GCC unroll 4
      for (int r = 0; r < NR; ++r) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv[r], a);
    }
  }
  for (int r = 0; r < NR; ++r) {
    for (int t = 0; t < NT; ++t) {
      float s = hsum16(acc[r][t]);
      for (int64_t j = i; j < n; ++j) s += bf16ToF32(x[r][j]) * bf16ToF32(y[t][j]);
      out[t * out_stride + r] = s;
    }
  }
}

template <int NR>
void bf16RowsTokens(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* acts,
                    size_t act_stride, int n_tok, float* out, int64_t out_stride) {
  switch (n_tok) {
    case 1:
      return bf16RowsTile<NR, 1>(n, w, w_stride, acts, act_stride, out, out_stride);
    case 2:
      return bf16RowsTile<NR, 2>(n, w, w_stride, acts, act_stride, out, out_stride);
    case 3:
      return bf16RowsTile<NR, 3>(n, w, w_stride, acts, act_stride, out, out_stride);
    default:
      return bf16RowsTile<NR, 4>(n, w, w_stride, acts, act_stride, out, out_stride);
  }
}

void gemmRowsBF16(int64_t n, const void* w, size_t w_stride, int nr, const void* acts,
                  size_t act_stride, int n_tok, float* out, int64_t out_stride) {
  const uint8_t* x = static_cast<const uint8_t*>(w);
  const uint8_t* a = static_cast<const uint8_t*>(acts);
  switch (nr) {
    case 1:
      return bf16RowsTokens<1>(n, x, w_stride, a, act_stride, n_tok, out, out_stride);
    case 2:
      return bf16RowsTokens<2>(n, x, w_stride, a, act_stride, n_tok, out, out_stride);
    case 3:
      return bf16RowsTokens<3>(n, x, w_stride, a, act_stride, n_tok, out, out_stride);
    default:
      return bf16RowsTokens<4>(n, x, w_stride, a, act_stride, n_tok, out, out_stride);
  }
}

}  // namespace

GemmRowsFn avx512Bf16RowsTile() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512bf16")) return gemmRowsBF16;
#endif
  return nullptr;
}

}  // namespace tpnode::model::kernels

#pragma GCC diagnostic pop
