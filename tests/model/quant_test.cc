#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
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

const TensorType kWeightTypes[] = {TensorType::kF32,  TensorType::kF16,  TensorType::kBF16,
                                   TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kQ4_K,
                                   TensorType::kQ6_K};

// Round trip error relative to the row's max |x|, per type.
double roundTripBound(TensorType t) {
  switch (t) {
    case TensorType::kF32:
      return 0;
    case TensorType::kF16:
      return 1e-3;
    case TensorType::kBF16:
      return 8e-3;
    case TensorType::kQ8_0:
      return 1.0 / 127;
    case TensorType::kQ4_0:
      return 1.0 / 8;
    case TensorType::kQ4_K:
      return 0.15;
    case TensorType::kQ6_K:
      return 1.0 / 16;
    case TensorType::kQ8_K:
      return 1.0 / 127;
    default:
      return 0;
  }
}

TEST(QuantTest, RoundTripsEveryType) {
  const int64_t n = 512;
  auto x = randomRow(n, 1);
  double amax = 0;
  for (float v : x) amax = std::max(amax, double(std::fabs(v)));
  for (TensorType t : kWeightTypes) {
    auto y = decode(t, encode(t, x), n);
    double err = 0;
    for (int64_t i = 0; i < n; ++i) err = std::max(err, double(std::fabs(x[i] - y[i])));
    EXPECT_LE(err, roundTripBound(t) * amax) << tensorTypeName(t);
    EXPECT_GT(err + (t == TensorType::kF32 ? 1 : 0), 0) << tensorTypeName(t) << " is lossless?";
  }
}

TEST(QuantTest, HalfConversionsRoundToNearestEven) {
  EXPECT_EQ(f32ToFp16(1.0f), 0x3c00);
  EXPECT_EQ(f32ToFp16(65504.f), 0x7bff);
  EXPECT_EQ(f32ToFp16(1e6f), 0x7c00);
  EXPECT_EQ(f32ToFp16(-2.0f), 0xc000);
  EXPECT_EQ(f32ToFp16(1.0f + 1.0f / 2048), 0x3c00);  // tie -> even
  EXPECT_EQ(f32ToFp16(1.0f + 3.0f / 2048), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(f32ToFp16(5.960464477539063e-08f), 0x0001);
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    ASSERT_EQ(f32ToFp16(fp16ToF32(static_cast<uint16_t>(h))), h) << h;
  }
  EXPECT_EQ(f32ToBf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16ToF32(0x3f80), 1.0f);
}

TEST(QuantTest, Q8ActivationsMatchLlamaCppRules) {
  // Q8_0: d = amax / 127, q = nearest-even(x * 127 / amax).
  std::vector<float> x(32, 0.f);
  x[0] = 127.f;
  x[1] = 2.5f;   // ties to even: 2
  x[2] = -3.5f;  // ties to even: -4
  BlockQ8_0 b;
  quantizeRowQ8_0(x.data(), &b, 32);
  EXPECT_EQ(fp16ToF32(b.d), 1.0f);
  EXPECT_EQ(b.qs[0], 127);
  EXPECT_EQ(b.qs[1], 2);
  EXPECT_EQ(b.qs[2], -4);
  // Q8_K: iscale = -127 / max (signed), d = 1 / iscale, bsums of 16.
  std::vector<float> z(256, 0.f);
  z[5] = -254.f;
  z[6] = 3.f;  // iscale = 0.5 -> 1.5 -> 2
  BlockQ8K k;
  quantizeRowQ8K(z.data(), &k, 256);
  EXPECT_EQ(k.d, 2.0f);
  EXPECT_EQ(k.qs[5], -127);
  EXPECT_EQ(k.qs[6], 2);
  EXPECT_EQ(k.bsums[0], -125);
}

// dot(w, a) for every kernel table equals the float reference on the decoded rows.
TEST(QuantTest, DotProductsMatchTheDecodedReference) {
  std::vector<const DotKernels*> tables = {&scalarKernels(), avx2Kernels(), avx512Kernels()};
  for (int64_t n : {256, 512, 1024, 2816}) {
    const int nr = 9;
    for (TensorType t : kWeightTypes) {
      TensorType at = activationType(t);
      std::vector<uint8_t> w;
      std::vector<std::vector<float>> wrows;
      for (int r = 0; r < nr; ++r) {
        auto row = randomRow(n, 10 + r, r % 2 ? 0.02f : 0.125f);
        auto enc = encode(t, row);
        wrows.push_back(decode(t, enc, n));
        w.insert(w.end(), enc.begin(), enc.end());
      }
      auto x = randomRow(n, 99);
      auto xa = encode(at, x);
      auto xd = decode(at, xa, n);
      for (const DotKernels* k : tables) {
        if (!k) continue;
        float out[nr];
        k->forType(t)(n, w.data(), rowBytes(t, n), nr, xa.data(), out);
        for (int r = 0; r < nr; ++r) {
          const auto [ref, mag] = referenceDot(wrows[r], xd);
          EXPECT_NEAR(out[r], ref, 2e-6 * mag + 1e-6)
              << k->isa << " " << tensorTypeName(t) << " n=" << n << " row " << r;
        }
      }
    }
  }
}

// The 4-row kernels on interleaved rows equal the plain kernels row by row.
TEST(QuantTest, InterleavedFourRowKernelsMatchPlainRows) {
  for (const DotKernels* k : {avx2Kernels(), avx2VnniKernels(), avx512Kernels()}) {
    if (!k) continue;
    for (TensorType t : {TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kQ4_K, TensorType::kQ6_K,
                         TensorType::kQ5_0, TensorType::kQ5_1}) {
      const int64_t n = 512, rows = 8;
      std::vector<uint8_t> w;
      for (int r = 0; r < rows; ++r) {
        auto enc = encode(t, randomRow(n, 40 + r, 0.1f));
        w.insert(w.end(), enc.begin(), enc.end());
      }
      auto xa = encode(activationType(t), randomRow(n, 7));
      float plain[rows], inter[rows];
      k->forType(t)(n, w.data(), rowBytes(t, n), rows, xa.data(), plain);
      std::vector<uint8_t> wi = w;
      interleaveRows4(t, wi.data(), rows, n);
      for (int g = 0; g < rows; g += 4) {
        k->x4ForType(t)(n, wi.data() + g * rowBytes(t, n), xa.data(), inter + g);
      }
      for (int r = 0; r < rows; ++r) {
        EXPECT_NEAR(inter[r], plain[r], 1e-5 * (std::fabs(plain[r]) + 1))
            << k->isa << " " << tensorTypeName(t) << " row " << r;
      }
    }
  }
}

// The prefill tiles (4 rows x 1..4 tokens) equal the 4-row kernels token by token.
TEST(QuantTest, GemmTilesMatchFourRowKernels) {
  for (const DotKernels* k : {avx2Kernels(), avx2VnniKernels(), avx512Kernels()}) {
    if (!k) continue;
    for (TensorType t : {TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kQ4_K, TensorType::kQ6_K,
                         TensorType::kQ5_0, TensorType::kQ5_1}) {
      const int64_t n = 512;
      std::vector<uint8_t> w;
      for (int r = 0; r < 4; ++r) {
        auto enc = encode(t, randomRow(n, 60 + r, 0.1f));
        w.insert(w.end(), enc.begin(), enc.end());
      }
      interleaveRows4(t, w.data(), 4, n);
      const TensorType at = activationType(t);
      const size_t ab = rowBytes(at, n);
      std::vector<uint8_t> acts;
      for (int tok = 0; tok < 4; ++tok) {
        auto enc = encode(at, randomRow(n, 80 + tok));
        acts.insert(acts.end(), enc.begin(), enc.end());
      }
      for (int nt = 1; nt <= 4; ++nt) {
        float tile[4 * 4];
        k->gemmForType(t)(n, w.data(), acts.data(), ab, nt, tile, 4);
        for (int tok = 0; tok < nt; ++tok) {
          float ref[4];
          k->x4ForType(t)(n, w.data(), acts.data() + tok * ab, ref);
          for (int r = 0; r < 4; ++r) {
            EXPECT_NEAR(tile[tok * 4 + r], ref[r], 1e-5 * (std::fabs(ref[r]) + 1))
                << k->isa << " " << tensorTypeName(t) << " nt=" << nt << " tok " << tok;
          }
        }
      }
    }
  }
}

// out += sum of w[r] * row r, for every table: lengths with and without 8- and 64-float chunks,
// rows a padded stride apart, zero rows; out's prior contents are kept.
TEST(QuantTest, AxpyAddsWeightedRows) {
  for (const DotKernels* k : {&scalarKernels(), avx2Kernels(), avx512Kernels()}) {
    if (!k) continue;
    for (int64_t n : {1, 7, 8, 64, 72, 130}) {
      for (int nr : {0, 1, 5}) {
        const size_t stride_floats = static_cast<size_t>(n) + 3;
        auto rows = randomRow(static_cast<int64_t>(stride_floats) * std::max(nr, 1), 5);
        auto w = randomRow(std::max(nr, 1), 6);
        auto out = randomRow(n, 7);
        std::vector<double> want(out.begin(), out.end());
        for (int r = 0; r < nr; ++r) {
          for (int64_t i = 0; i < n; ++i) want[i] += double(w[r]) * rows[r * stride_floats + i];
        }
        k->f32_axpy(n, rows.data(), stride_floats * sizeof(float), nr, w.data(), out.data());
        for (int64_t i = 0; i < n; ++i) {
          EXPECT_NEAR(out[i], want[i], 1e-5) << k->isa << " n=" << n << " nr=" << nr << " i=" << i;
        }
      }
    }
  }
}

// Every table's Q8_K activation quantizer writes quantizeRowQ8K's bytes: random rows at several
// scales, a zero block, blocks whose largest magnitude appears as -a before +a and as +a before
// -a, one where it is the block's last value, and values on exact rounding ties.
TEST(QuantTest, Q8KQuantizersMatchScalarBytes) {
  const int64_t n = 6 * kQKK;
  std::vector<std::vector<float>> rows;
  for (uint32_t seed = 1; seed <= 4; ++seed) rows.push_back(randomRow(n, seed, seed * 0.3f));
  std::vector<float> edge(n, 0.f);  // block 0 zero
  for (int j = 0; j < kQKK; ++j) edge[kQKK + j] = (j % 7 - 3) * 0.5f;
  edge[kQKK + 3] = -2.f;  // block 1: -2 first, +2 later: iscale from -2
  edge[kQKK + 9] = 2.f;
  for (int j = 0; j < kQKK; ++j) edge[2 * kQKK + j] = (j - 128) * (127.f / 254);  // x.5 ties
  for (int j = 0; j < kQKK; ++j) edge[3 * kQKK + j] = (j % 5 - 2) * 0.25f;
  edge[4 * kQKK - 1] = -5.f;  // block 3: the largest magnitude is its last value
  edge[4 * kQKK + 8] = 3.f;   // block 4: +3 in its second 8 values, -3 later
  edge[4 * kQKK + 200] = -3.f;
  rows.push_back(edge);
  for (const DotKernels* k : {&scalarKernels(), avx2Kernels(), avx512Kernels()}) {
    if (!k) continue;
    for (const auto& x : rows) {
      std::vector<BlockQ8K> want(n / kQKK), got(n / kQKK);
      quantizeRowQ8K(x.data(), want.data(), n);
      k->quantize_q8_k(x.data(), got.data(), n);
      for (size_t b = 0; b < want.size(); ++b) {
        EXPECT_EQ(std::memcmp(&want[b], &got[b], sizeof(BlockQ8K)), 0) << k->isa << " block " << b;
      }
    }
  }
}

// Every table's Q8_0 activation quantizer writes quantizeRowQ8_0's bytes: random rows at several
// scales, a zero block, a block whose largest magnitude is negative, and values on exact rounding
// ties (x * 127 / amax = k + 0.5 for even and odd k); 37 blocks, so two whole groups of 16 (the
// AVX-512 quantizer's) and a tail of 5, with the special blocks in both groups and the tail.
TEST(QuantTest, Q8_0QuantizersMatchScalarBytes) {
  const int64_t n = 37 * kQK8_0;  // not a multiple of 256
  std::vector<std::vector<float>> rows;
  for (uint32_t seed = 1; seed <= 4; ++seed) rows.push_back(randomRow(n, seed, seed * 0.3f));
  std::vector<float> edge(n, 0.f);  // block 0 zero
  for (int j = 0; j < kQK8_0; ++j) edge[kQK8_0 + j] = (j % 7 - 3) * 0.5f;
  edge[kQK8_0 + 3] = -2.f;  // block 1: its largest magnitude negative
  // Block 2: amax 127 / 64, so 127 / amax = 64 and x * 64 = j - 16 + 0.5 are ties of both parities.
  edge[2 * kQK8_0] = 127.f / 64;
  for (int j = 1; j < kQK8_0; ++j) edge[2 * kQK8_0 + j] = (j - 16 + 0.5f) / 64;
  for (int64_t at : {int64_t{17}, int64_t{34}}) {  // the same blocks in the next group and the tail
    std::copy_n(edge.begin(), 3 * kQK8_0, edge.begin() + at * kQK8_0);
  }
  edge[20 * kQK8_0 + 31] = -1e-3f;  // a block of one tiny value, its last
  rows.push_back(edge);
  int checked = 0;
  for (const DotKernels* k :
       {&scalarKernels(), avx2Kernels(), avx2VnniKernels(), avx512Kernels()}) {
    if (!k) continue;
    ASSERT_NE(k->quantize_q8_0, nullptr) << k->isa;
    for (const auto& x : rows) {
      std::vector<BlockQ8_0> want(n / kQK8_0), got(n / kQK8_0);
      quantizeRowQ8_0(x.data(), want.data(), n);
      k->quantize_q8_0(x.data(), got.data(), n);
      for (size_t b = 0; b < want.size(); ++b) {
        EXPECT_EQ(std::memcmp(&want[b], &got[b], sizeof(BlockQ8_0)), 0) << k->isa << " block " << b;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 0);
}

}  // namespace
}  // namespace tpnode::model::kernels
