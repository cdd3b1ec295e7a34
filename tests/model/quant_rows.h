// Test helpers shared by the quantization tests: random rows, one row encoded to / decoded from
// a tensor type through the kernels' own quantizeRow / dequantizeRow, and plain rows packed into
// a Matrix as a kernel table runs it.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "model/kernels/cpu/matmul.h"
#include "model/kernels/cpu/quantize.h"

namespace tpnode::model::kernels::testing {

inline std::vector<float> randomRow(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// A matrix of `rows` plain rows of type `type` (the bytes w), packed as kernel table `k` runs it.
inline Matrix packedMatrix(TensorType type, int64_t rows, int64_t cols,
                           const std::vector<uint8_t>& w, const DotKernels& k = bestKernels()) {
  Matrix m;
  m.type = type;
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = rowBytes(type, static_cast<uint64_t>(cols));
  m.data = HostBuffer(w.size());
  std::memcpy(m.data.data(), w.data(), w.size());
  return packWeights(std::move(m), WeightLayout::kAuto, k);
}

inline std::vector<uint8_t> encode(TensorType t, const std::vector<float>& x) {
  std::vector<uint8_t> b(rowBytes(t, x.size()));
  quantizeRow(t, x.data(), b.data(), static_cast<int64_t>(x.size()));
  return b;
}

// The dot product of two decoded rows in double, and the sum of the products' magnitudes (the
// scale of the rounding a kernel may add).
struct RefDot {
  double value = 0, magnitude = 0;
};
inline RefDot referenceDot(const std::vector<float>& w, const std::vector<float>& x) {
  RefDot d;
  for (size_t i = 0; i < w.size(); ++i) {
    d.value += double(w[i]) * x[i];
    d.magnitude += std::fabs(double(w[i]) * x[i]);
  }
  return d;
}

inline std::vector<float> decode(TensorType t, const std::vector<uint8_t>& b, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  dequantizeRow(t, b.data(), y.data(), n);
  return y;
}

}  // namespace tpnode::model::kernels::testing
