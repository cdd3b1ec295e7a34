// Element-wise and per-row float ops of the Llama block, numerically as ggml's CPU backend
// computes them (RMSNorm sums squares in double; RoPE builds angles by repeated multiplication
// in float; softmax sums exp in double).
#pragma once

#include <cstdint>

#include "model/config.h"

namespace tpnode::model::kernels {

// y = x / sqrt(mean(x^2) + eps) * w   (w may be nullptr: no weight)
void rmsNorm(const float* x, const float* w, float* y, int64_t n, float eps);

// Rotates one head vector in place at position `pos` (first n_rot dims).
// freq_factors: nullptr or n_rot / 2 divisors of the angles (llama3 rope_freqs).
void rope(float* v, int64_t n_rot, int64_t pos, float base, float freq_scale, RopeStyle style,
          const float* freq_factors);

// In place: x = softmax(x) over n values.
void softmax(float* x, int64_t n);

// g = silu(g) * u
void swiglu(float* g, const float* u, int64_t n);

}  // namespace tpnode::model::kernels
