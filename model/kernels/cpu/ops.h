// Element-wise and per-row float ops of the Llama block, bit for bit as llama.cpp's CPU backend
// computes them (RMSNorm sums squares in double, one by one; RoPE builds angles by repeated
// multiplication in float and rotates with the fused multiply-adds GCC makes of ggml's
// rotate_pairs; softmax and SwiGLU use ggml's SIMD exp: model/kernels/cpu/ggml_math.h). Pure; any
// thread.
#pragma once

#include <cstdint>
#include <optional>

#include "model/config.h"

namespace tpnode::model::kernels {

// y = x / sqrt(mean(x^2) + eps) * w   (w may be nullptr: no weight)
void rmsNorm(const float* x, const float* w, float* y, int64_t n, float eps);

// rmsNorm of `rows` rows of n values, row r at x + r * n and y + r * n (y may be x): rmsNorm's
// bits row by row. With a SIMD kernel table each row's squares are added in vectors, in no
// particular order, and that sum gives the mean wherever it decides rmsNorm's
// (rmsMeanFromAnyOrderSum); the rare row where it does not is added again in column order.
void rmsNormRows(const float* x, const float* w, float* y, int64_t n, int64_t rows, float eps);

// rmsNorm's mean of squares -- float(S / n), S its double sum of the n squares (each rounded to
// float) added one by one in column order -- from `sum`, the same squares added in any other
// order, where that determines it: both sums lie within (n - 1) x 2^-53 of the exact sum
// (relative; the terms are not negative), and when every double in that interval around `sum`
// gives one float mean, S gives it too (division and rounding are monotonic). Otherwise (a mean
// within ~4n double ulps of a float rounding boundary: 13 of 2 million rows of 640 normal
// values, 42 of 2 million of 2048; an inf or NaN sum) nullopt.
std::optional<float> rmsMeanFromAnyOrderSum(double sum, int64_t n);

// rmsNormRows without SIMD (what it runs with the scalar kernel table): the same bits.
void rmsNormRowsBaseline(const float* x, const float* w, float* y, int64_t n, int64_t rows,
                         float eps);

// Rotates one head vector in place at position `pos` (first n_rot dims).
// freq_factors: nullptr or n_rot / 2 divisors of the angles (llama3 rope_freqs).
void rope(float* v, int64_t n_rot, int64_t pos, float base, float freq_scale, RopeStyle style,
          const float* freq_factors);

// rope() in two steps, for the heads of one position: ropeAngles writes the cos and sin of
// rotation j (j < n_rot / 2) to cs[2j] and cs[2j + 1]; ropeRotate turns one head vector by them.
// ropeAngles once and ropeRotate per head give rope()'s bits.
void ropeAngles(int64_t n_rot, int64_t pos, float base, float freq_scale, const float* freq_factors,
                float* cs);
void ropeRotate(float* v, int64_t n_rot, RopeStyle style, const float* cs);

// ropeRotate one pair at a time (what it runs without the AVX-512 kernel table): the same bits.
void ropeRotateBaseline(float* v, int64_t n_rot, RopeStyle style, const float* cs);

// In place: x = softmax(x) over n values, as ggml::softmax (x[0] starts a chunk of 16: pass
// attention rows from a multiple of 16 cells, masked cells as -inf).
void softmax(float* x, int64_t n);

// g = silu(g) * u over one row of n (ggml::swiglu: its last n % 16 use libm's expf).
void swiglu(float* g, const float* u, int64_t n);

}  // namespace tpnode::model::kernels
