// Vectorisable passes of the sampler (internal to model/sampling.cc): exp for its softmax, the
// row's max and the greedy pick's argmax.
//
// Contract: pure functions with results that depend only on IEEE float arithmetic (no libm),
// so the same binary gives the same bits on every machine; the exp passes are branch-free.
// expNonPositive: relative error below 5e-7 on (-87, 0]; 0 at or below -87, for -inf and NaN.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

namespace tpnode::model {

inline float expNonPositive(float x) {
  x = x > -87.0f ? x : -87.0f;  // also maps NaN and -inf to -87
  // x = n ln2 + r with n = round(x / ln2) (the 1.5 * 2^23 trick), |r| <= ln2 / 2, and ln2 split
  // in a high part exact in float and a low part (Cody and Waite).
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = (x - n * 0.693145751953125f) - n * 1.428606765330187e-06f;
  // exp(r) by its Taylor series to degree 6 (error < 1.2e-7 for |r| <= 0.347).
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const auto bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;  // 2^n, n >= -126
  const float scaled = p * std::bit_cast<float>(bits);
  return x > -87.0f ? scaled : 0.0f;
}

// 4 floats as one value (GCC/Clang vector extension: one SSE2 register on baseline x86-64,
// NEON on arm64), so the passes below run 4 lanes at once without target-specific code.
using Float4 = float __attribute__((vector_size(16)));
using Int4 = int32_t __attribute__((vector_size(16)));

inline Float4 load4(const float* x) {
  Float4 v;
  std::memcpy(&v, x, sizeof(v));
  return v;
}

// expNonPositive on 4 lanes, the same operations in the same order (bit-identical results).
inline Float4 expNonPositive4(Float4 x) {
  const Float4 lo = Float4{} - 87.0f;
  x = x > lo ? x : lo;
  const Float4 n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const Float4 r = (x - n * 0.693145751953125f) - n * 1.428606765330187e-06f;
  Float4 p = Float4{} + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const Int4 bits = (__builtin_convertvector(n, Int4) + 127) << 23;
  Float4 scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  const Float4 scaled = p * scale;
  return x > lo ? scaled : Float4{};
}

// max of x[0..n) (n > 0) as `best = x[i] > best ? x[i] : best` from best = x[0] finds it: NaN
// values after x[0] are passed over. 16 values per step in 4 independent chains of 4 lanes.
inline float maxOf(const float* x, size_t n) {
  const Float4 none = Float4{} - std::numeric_limits<float>::infinity();
  Float4 m[4] = {none, none, none, none};
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int c = 0; c < 4; ++c) {
      const Float4 v = load4(x + i + 4 * c);
      m[c] = v > m[c] ? v : m[c];
    }
  }
  m[0] = m[1] > m[0] ? m[1] : m[0];
  m[2] = m[3] > m[2] ? m[3] : m[2];
  m[0] = m[2] > m[0] ? m[2] : m[0];
  float best = x[0];
  for (int j = 0; j < 4; ++j) best = m[0][j] > best ? m[0][j] : best;
  for (; i < n; ++i) best = x[i] > best ? x[i] : best;
  return best;
}

// The index the scalar loop `if (x[i] > x[best]) best = i` from best = 0 ends at (n > 0): the
// first index of the largest value, ties to the lowest index, NaN values after x[0] passed
// over, 0 when x[0] is NaN. One pass: each of 4 lanes keeps its largest value and the first
// index it was at; the lanes are merged by value, then by index.
inline int32_t firstArgmax(const float* x, int32_t n) {
  if (!(x[0] == x[0])) return 0;
  Float4 m = Float4{} + x[0];
  Int4 at = Int4{};
  Int4 cur = Int4{0, 1, 2, 3};
  int32_t i = 0;
  for (; i <= n - 4; i += 4) {
    const Float4 v = load4(x + i);
    const Int4 gt = v > m;
    m = gt ? v : m;
    at = gt ? cur : at;
    cur += 4;
  }
  float best = m[0];
  int32_t best_at = at[0];
  for (int j = 1; j < 4; ++j) {
    if (m[j] > best || (m[j] == best && at[j] < best_at)) {
      best = m[j];
      best_at = at[j];
    }
  }
  for (; i < n; ++i) {
    if (x[i] > best) {
      best = x[i];
      best_at = i;
    }
  }
  return best_at;
}

// sum of exp(x[i] - max) over x[0..n): 4 float lanes, added into a double every 1024
// values (so rounding does not build up over long rows), then the tail; a fixed order.
inline double sumExp(const float* x, size_t n, float max) {
  double sum = 0;
  size_t i = 0;
  while (i + 4 <= n) {
    Float4 lane{};
    const size_t block_end = std::min(n, i + 1024);
    for (; i + 4 <= block_end; i += 4) lane += expNonPositive4(load4(x + i) - max);
    for (int j = 0; j < 4; ++j) sum += lane[j];
  }
  for (; i < n; ++i) sum += expNonPositive(x[i] - max);
  return sum;
}

}  // namespace tpnode::model
