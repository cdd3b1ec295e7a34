// Q5_0 / Q5_1 weights and Q8_1 activations: block layout (hand-built blocks), round trips, and
// every kernel table's dot product against the scalar reference and the decoded floats.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "model/kernels/cpu/dot.h"
#include "model/kernels/cpu/quantize.h"
#include "tests/model/quant_rows.h"

namespace tpnode::model::kernels {
namespace {

using testing::decode;
using testing::encode;
using testing::randomRow;
using testing::referenceDot;

TEST(QuantQ5Test, TypeTableAndActivationTypes) {
  EXPECT_EQ(tensorTypeInfo(TensorType::kQ5_0).type_size, 22u);
  EXPECT_EQ(tensorTypeInfo(TensorType::kQ5_1).type_size, 24u);
  EXPECT_TRUE(tensorTypeInfo(TensorType::kQ5_0).supported);
  EXPECT_TRUE(tensorTypeInfo(TensorType::kQ5_1).supported);
  EXPECT_EQ(rowBytes(TensorType::kQ5_0, 640), 20u * 22);
  EXPECT_EQ(activationType(TensorType::kQ5_0), TensorType::kQ8_0);
  EXPECT_EQ(activationType(TensorType::kQ5_1), TensorType::kQ8_1);
}

// A block built by hand in ggml's layout decodes to the values ggml's dequantize gives.
TEST(QuantQ5Test, HandBuiltBlocksDecodeAsGgml) {
  BlockQ5_0 b0{};
  b0.d = f32ToFp16(0.5f);
  b0.qs[0] = 0x3F;   // value 0: nibble 15, value 16: nibble 3
  b0.qs[15] = 0xA1;  // value 15: nibble 1, value 31: nibble 10
  b0.qh[0] = 0x01;   // bit 0: value 0 gets bit 4 -> 31
  b0.qh[3] = 0x80;   // bit 31: value 31 gets bit 4 -> 26
  float y[32];
  dequantizeRow(TensorType::kQ5_0, &b0, y, 32);
  EXPECT_EQ(y[0], 0.5f * (31 - 16));
  EXPECT_EQ(y[16], 0.5f * (3 - 16));
  EXPECT_EQ(y[15], 0.5f * (1 - 16));
  EXPECT_EQ(y[31], 0.5f * (26 - 16));
  EXPECT_EQ(y[1], 0.5f * -16);
  BlockQ5_1 b1{};
  b1.d = f32ToFp16(0.25f);
  b1.m = f32ToFp16(-1.0f);
  b1.qs[2] = 0x07;
  b1.qh[2] = 0x04;  // bit 18: value 18 -> 16 + 0
  dequantizeRow(TensorType::kQ5_1, &b1, y, 32);
  EXPECT_EQ(y[2], 0.25f * 7 - 1);
  EXPECT_EQ(y[18], 0.25f * 16 - 1);
  EXPECT_EQ(y[0], -1.0f);
}

TEST(QuantQ5Test, RoundTripsAndQ8_1Sum) {
  const int64_t n = 640;
  auto x = randomRow(n, 3);
  double amax = 0;
  for (float v : x) amax = std::max(amax, double(std::fabs(v)));
  for (TensorType t : {TensorType::kQ5_0, TensorType::kQ5_1, TensorType::kQ8_1}) {
    auto y = decode(t, encode(t, x), n);
    double err = 0;
    for (int64_t i = 0; i < n; ++i) err = std::max(err, double(std::fabs(x[i] - y[i])));
    const double bound = t == TensorType::kQ8_1 ? 1.0 / 127 : 1.0 / 15;
    EXPECT_LE(err, bound * amax) << tensorTypeName(t);
    EXPECT_GT(err, 0) << tensorTypeName(t);
  }
  // As llama.cpp's AVX2 quantize_row_q8_1: s = f16(d * sum q) with the unrounded d = amax/127.
  std::vector<BlockQ8_1> q(static_cast<size_t>(n / 32));
  quantizeRowQ8_1(x.data(), q.data(), n);
  for (size_t b = 0; b < q.size(); ++b) {
    float bmax = 0;
    for (int j = 0; j < 32; ++j) bmax = std::max(bmax, std::fabs(x[b * 32 + j]));
    int sum = 0;
    for (int8_t v : q[b].qs) sum += v;
    EXPECT_EQ(q[b].s, f32ToFp16(bmax / 127.f * static_cast<float>(sum)));
  }
}

// Every table equals the decoded float reference; SIMD tables equal scalar up to float order.
TEST(QuantQ5Test, DotProductsMatchScalarAndDecodedReference) {
  std::vector<const DotKernels*> tables = {&scalarKernels(), avx2Kernels(), avx512Kernels()};
  for (int64_t n : {32, 96, 640, 2048}) {
    for (TensorType t : {TensorType::kQ5_0, TensorType::kQ5_1}) {
      const int nr = 9;
      const TensorType at = activationType(t);
      std::vector<uint8_t> w;
      std::vector<std::vector<float>> wrows;
      for (int r = 0; r < nr; ++r) {
        auto enc = encode(t, randomRow(n, 20 + r, r % 2 ? 0.02f : 0.125f));
        wrows.push_back(decode(t, enc, n));
        w.insert(w.end(), enc.begin(), enc.end());
      }
      auto xa = encode(at, randomRow(n, 77));
      auto xd = decode(at, xa, n);
      float scalar[nr];
      scalarKernels().forType(t)(n, w.data(), rowBytes(t, n), nr, xa.data(), scalar);
      for (const DotKernels* k : tables) {
        if (!k) continue;
        float out[nr];
        k->forType(t)(n, w.data(), rowBytes(t, n), nr, xa.data(), out);
        for (int r = 0; r < nr; ++r) {
          const auto [ref, mag] = referenceDot(wrows[r], xd);
          // Q5_1's offset term uses s = f16(d * sum q): one f16 rounding per block.
          const double tol = (t == TensorType::kQ5_1 ? 2e-3 : 2e-6) * mag + 1e-6;
          EXPECT_NEAR(out[r], ref, tol) << k->isa << " " << tensorTypeName(t) << " n=" << n;
          EXPECT_NEAR(out[r], scalar[r], 1e-5 * mag + 1e-7) << k->isa << " vs scalar";
        }
      }
    }
  }
}

}  // namespace
}  // namespace tpnode::model::kernels
