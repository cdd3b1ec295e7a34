#include "model/kernels/cpu/ops.h"

#include <cmath>
#include <vector>

#include "model/kernels/cpu/ggml_math.h"

namespace tpnode::model::kernels {

void rmsNorm(const float* x, const float* w, float* y, int64_t n, float eps) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  if (w) {
    for (int64_t i = 0; i < n; ++i) y[i] *= w[i];
  }
}

void rmsNormRows(const float* x, const float* w, float* y, int64_t n, int64_t rows, float eps) {
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
      const float mean = static_cast<float>(sum[r] / static_cast<double>(n));
      const float scale = 1.0f / std::sqrt(mean + eps);
      const float* xi = xr + r * n;
      float* yi = y + (r0 + r) * n;
      for (int64_t i = 0; i < n; ++i) yi[i] = xi[i] * scale;
      if (w) {
        for (int64_t i = 0; i < n; ++i) yi[i] *= w[i];
      }
    }
  }
  for (; r0 < rows; ++r0) rmsNorm(x + r0 * n, w, y + r0 * n, n, eps);
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

inline void ropeRotateImpl(float* v, int64_t n_rot, RopeStyle style, const float* cs) {
  for (int64_t i0 = 0; i0 < n_rot; i0 += 2) {
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
#endif

}  // namespace

void ropeRotate(float* v, int64_t n_rot, RopeStyle style, const float* cs) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool has_fma = __builtin_cpu_supports("fma");
  if (has_fma) {
    ropeRotateFma(v, n_rot, style, cs);
    return;
  }
#endif
  ropeRotateImpl(v, n_rot, style, cs);
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
