// The 16-row repacked Q4_K layout and its AVX-512 kernels (decode dot and prefill tiles) give
// the scalar Q4_K dot product row by row: random rows, extreme blocks (every nibble 15, every
// scale and min 63, activations at -128 / 127), odd block counts, and matmul on row counts with
// and without a 16-row layout. The AMX tile (16 tokens per call, where the CPU has AMX-INT8)
// gives each token the AVX-512 tile's bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "model/kernels/cpu/dot.h"
#include "model/kernels/cpu/matmul.h"
#include "model/kernels/cpu/q4k_x16.h"
#include "model/kernels/cpu/quantize.h"
#include "tests/model/quant_rows.h"

namespace tpnode::model::kernels {
namespace {

using testing::encode;
using testing::packedMatrix;
using testing::randomRow;

constexpr TensorType kQ4K = TensorType::kQ4_K;

// `rows` plain Q4_K rows of n columns, quantized from random floats (row scales vary).
std::vector<uint8_t> randomRows(int64_t rows, int64_t n, uint32_t seed) {
  std::vector<uint8_t> w;
  for (int64_t r = 0; r < rows; ++r) {
    auto enc = encode(kQ4K, randomRow(n, seed + static_cast<uint32_t>(r), r % 3 ? 0.05f : 0.5f));
    w.insert(w.end(), enc.begin(), enc.end());
  }
  return w;
}

// Q4_K blocks at the extremes of every field: all nibbles 15, all 6-bit scales and mins 63.
std::vector<uint8_t> extremeRows(int64_t rows, int64_t n) {
  std::vector<BlockQ4K> b(static_cast<size_t>(rows * n / kQKK));
  for (BlockQ4K& x : b) {
    x.d = f32ToFp16(1.0f);
    x.dmin = f32ToFp16(0.5f);
    std::memset(x.scales, 0xFF, sizeof x.scales);
    std::memset(x.qs, 0xFF, sizeof x.qs);
  }
  std::vector<uint8_t> w(b.size() * sizeof(BlockQ4K));
  std::memcpy(w.data(), b.data(), w.size());
  return w;
}

// Q8_K activations with every value `v` (-128 or 127), bsums consistent.
std::vector<uint8_t> constantActs(int64_t n, int8_t v) {
  std::vector<BlockQ8K> b(static_cast<size_t>(n / kQKK));
  for (BlockQ8K& y : b) {
    y.d = 0.25f;
    std::memset(y.qs, static_cast<uint8_t>(v), sizeof y.qs);
    for (int16_t& s : y.bsums) s = static_cast<int16_t>(16 * v);
  }
  std::vector<uint8_t> a(b.size() * sizeof(BlockQ8K));
  std::memcpy(a.data(), b.data(), a.size());
  return a;
}

// `tokens` Q8_K activation rows of n columns, back to back: row t is one_row(t).
template <typename OneRow>
std::vector<uint8_t> tokenActs(int64_t n, int tokens, OneRow one_row) {
  std::vector<uint8_t> acts;
  acts.reserve(static_cast<size_t>(tokens) * rowBytes(TensorType::kQ8_K, n));
  for (int t = 0; t < tokens; ++t) {
    const std::vector<uint8_t> row = one_row(t);
    acts.insert(acts.end(), row.begin(), row.end());
  }
  return acts;
}

std::vector<float> scalarDots(const std::vector<uint8_t>& w, int64_t rows, int64_t n,
                              const uint8_t* act) {
  std::vector<float> out(static_cast<size_t>(rows));
  scalarKernels().q4_k(n, w.data(), rowBytes(kQ4K, n), static_cast<int>(rows), act, out.data());
  return out;
}

std::vector<uint8_t> repacked(const std::vector<uint8_t>& w, int64_t rows, int64_t n) {
  std::vector<uint8_t> p(q4kX16RowBytes(n) * static_cast<size_t>(rows));
  repackQ4Kx16(w.data(), p.data(), rows, n);
  return p;
}

const DotKernels* x16Kernels() {
  const DotKernels* k = avx512Kernels();
  return k && k->x16_q4_k && k->gemm16_values_q4_k ? k : nullptr;
}

void expectClose(float got, float want, const char* what, int64_t n, int64_t r) {
  EXPECT_NEAR(got, want, 1e-5 * (std::fabs(want) + 1)) << what << " n=" << n << " row " << r;
}

TEST(Q4KX16Test, RepackedDotMatchesScalarRows) {
  const DotKernels* k = x16Kernels();
  if (!k) GTEST_SKIP() << "no AVX-512 VNNI";
  for (int64_t n : {256, 512, 1024, 2816}) {
    const int64_t rows = 32;
    auto w = randomRows(rows, n, static_cast<uint32_t>(n));
    auto p = repacked(w, rows, n);
    auto act = encode(TensorType::kQ8_K, randomRow(n, 3));
    auto want = scalarDots(w, rows, n, act.data());
    float got[rows];
    for (int64_t g = 0; g < rows; g += kQ4KGroup) {
      k->x16_q4_k(n, p.data() + g * q4kX16RowBytes(n), act.data(), got + g);
    }
    for (int64_t r = 0; r < rows; ++r) expectClose(got[r], want[r], "dot16", n, r);
  }
}

// Tensor reads undo the repack: random bytes (every scale/min bit pattern is a valid Q4_K
// block) come back identical.
TEST(Q4KX16Test, UnpackRestoresTheFileBytes) {
  const int64_t rows = 32, cols = 512;
  const size_t bytes = rowBytes(TensorType::kQ4_K, cols) * rows;
  std::vector<uint8_t> src(bytes);
  std::mt19937 rng(5);
  for (uint8_t& b : src) b = static_cast<uint8_t>(rng());
  std::vector<uint8_t> packed(q4kX16RowBytes(cols) * rows), back(bytes);
  repackQ4Kx16(src.data(), packed.data(), rows, cols);
  unpackQ4Kx16(packed.data(), back.data(), rows, cols);
  EXPECT_EQ(back, src);
}

TEST(Q4KX16Test, ExtremeBlocksStayExact) {
  const DotKernels* k = x16Kernels();
  if (!k) GTEST_SKIP() << "no AVX-512 VNNI";
  const int64_t n = 2816, rows = 16;
  auto w = extremeRows(rows, n);
  auto p = repacked(w, rows, n);
  for (int8_t v : {int8_t{-128}, int8_t{127}}) {
    auto act = constantActs(n, v);
    auto want = scalarDots(w, rows, n, act.data());
    // Exact value: per block d * 63 * 15 * v * 256 - dmin * 63 * v * 256, times y.d.
    const double exact = double(n / kQKK) * 0.25 * (63.0 * 15 * v * 256 - 0.5 * 63 * v * 256);
    EXPECT_NEAR(want[0], exact, 1e-6 * std::fabs(exact));
    float got[rows];
    k->x16_q4_k(n, p.data(), act.data(), got);
    for (int64_t r = 0; r < rows; ++r) expectClose(got[r], want[r], "extreme", n, r);
    float tile[kKQuantX16Tokens * rows];
    std::vector<uint8_t> acts;
    for (int t = 0; t < kKQuantX16Tokens; ++t) acts.insert(acts.end(), act.begin(), act.end());
    k->gemm16_q4_k(n, p.data(), acts.data(), act.size(), kKQuantX16Tokens, tile, rows);
    for (int64_t i = 0; i < kKQuantX16Tokens * rows; ++i) {
      expectClose(tile[i], want[i % rows], "tile", n, i);
    }
  }
}

// A tile's output for `nt` of the `tokens` activation rows (n columns each, Q8_K) against group
// `p`, rows `stride` floats apart: each of the nt tokens' 16 columns holds the one-token decode
// dot's bits, every other value is still -7.
void expectDecodeDotBits(const DotKernels& k, int64_t n, const std::vector<uint8_t>& p,
                         const std::vector<uint8_t>& acts, int nt, int tokens, int64_t stride,
                         const std::vector<float>& tile, const char* what) {
  const size_t ab = rowBytes(TensorType::kQ8_K, n);
  for (int t = 0; t < tokens; ++t) {
    float ref[kQ4KGroup];
    k.x16_q4_k(n, p.data(), acts.data() + t * ab, ref);
    for (int64_t r = 0; r < stride; ++r) {
      const size_t i = static_cast<size_t>(t * stride + r);
      const float want = t < nt && r < kQ4KGroup ? ref[r] : -7.f;
      EXPECT_EQ(tile[i], want) << what << " n=" << n << " nt=" << nt << " token " << t << " col "
                               << r;
    }
  }
}

// Every tile width (1..kKQuantX16Tokens tokens), on the group and on its unpacked values (what
// prefill over more tokens runs), gives each of its tokens the one-token tile's bits (the integer
// sums are exact and the float operations the same per token), on one block and on several.
TEST(Q4KX16Test, PrefillTilesMatchDecodeDots) {
  const DotKernels* k = x16Kernels();
  if (!k) GTEST_SKIP() << "no AVX-512 VNNI";
  constexpr int kTok = kKQuantX16Tokens;
  for (int64_t n : {256, 768, 2816}) {
    const int64_t rows = 16;
    auto p = repacked(randomRows(rows, n, 50), rows, n);
    const size_t ab = rowBytes(TensorType::kQ8_K, n);
    const std::vector<uint8_t> acts = tokenActs(n, kTok, [&](int t) {
      return encode(TensorType::kQ8_K, randomRow(n, 70 + t, t % 2 ? 0.3f : 3.0f));
    });
    std::vector<uint8_t> values(static_cast<size_t>(kX16ValueBytesPerColumn * n));
    k->unpack16_q4_k(n, p.data(), values.data());
    const int64_t stride = 20;  // wider than the tile: the tile writes only its 16 columns
    for (int nt = 1; nt <= kTok; ++nt) {
      std::vector<float> tile(static_cast<size_t>(kTok * stride), -7.f);
      std::vector<float> on_values(tile);
      k->gemm16_q4_k(n, p.data(), acts.data(), ab, nt, tile.data(), stride);
      k->gemm16_values_q4_k(n, p.data(), values.data(), acts.data(), ab, nt, on_values.data(),
                            stride);
      expectDecodeDotBits(*k, n, p, acts, nt, kTok, stride, tile, "packed");
      expectDecodeDotBits(*k, n, p, acts, nt, kTok, stride, on_values, "unpacked");
    }
  }
}

// matmul through packWeights: 48 rows take the 16-row layout, 20 rows the 4-row one, 18 rows
// stay plain; every token of a batch (tails of the 4- and 8-token tiles included) matches scalar.
TEST(Q4KX16Test, MatmulMatchesScalarForEveryLayout) {
  ThreadPool pool(2);
  std::vector<uint8_t> scratch;
  const int64_t n = 512;
  for (int64_t rows : {48, 20, 18}) {
    auto w = randomRows(rows, n, static_cast<uint32_t>(100 + rows));
    Matrix m = packedMatrix(kQ4K, rows, n, w);
    if (rows == 48 && bestKernels().gemm16ForType(kQ4K)) {  // the table packWeights uses
      EXPECT_EQ(m.interleave, kQ4KGroup);
    }
    if (rows == 18) {
      EXPECT_EQ(m.interleave, 1);
    }
    for (int64_t n_tok : {1, 3, 6, 8, 13, 17}) {  // tiles of 8 tokens and their tails
      std::vector<float> x(static_cast<size_t>(n_tok * n));
      for (int64_t t = 0; t < n_tok; ++t) {
        auto row = randomRow(n, static_cast<uint32_t>(200 + t));
        std::copy(row.begin(), row.end(), x.begin() + t * n);
      }
      std::vector<float> y(static_cast<size_t>(n_tok * rows));
      matmul(m, x.data(), n_tok, y.data(), rows, pool, scratch);
      for (int64_t t = 0; t < n_tok; ++t) {
        auto act = encode(TensorType::kQ8_K,
                          std::vector<float>(x.begin() + t * n, x.begin() + (t + 1) * n));
        auto want = scalarDots(w, rows, n, act.data());
        for (int64_t r = 0; r < rows; ++r) {
          expectClose(y[static_cast<size_t>(t * rows + r)], want[r], "matmul", rows, r);
        }
      }
    }
  }
}

// The AMX tile (1..16 tokens on a group's unpacked values) gives each token the bits of the
// AVX-512 one-token dot: random blocks over one and several super-blocks, and extreme blocks
// (every nibble 15, every scale and min 63, activations at -128 and 127).
TEST(Q4KX16Test, AmxTilesMatchDecodeDots) {
  const DotKernels* k = avx512AmxKernels();
  if (!k) GTEST_SKIP() << "no AMX-INT8 on this CPU (or Linux older than 5.16)";
  ASSERT_NE(k->gemm16_values_q4_k_amx, nullptr);
  constexpr int kTok = kAmxTokens;
  for (int64_t n : {256, 768, 2816, -2816}) {  // -2816: 2816 columns of extreme blocks
    const bool extreme = n < 0;
    n = std::abs(n);
    const int64_t rows = 16;
    auto p = repacked(extreme ? extremeRows(rows, n) : randomRows(rows, n, 90), rows, n);
    const size_t ab = rowBytes(TensorType::kQ8_K, n);
    const std::vector<uint8_t> acts = tokenActs(n, kTok, [&](int t) {
      return extreme ? constantActs(n, t % 2 ? int8_t{127} : int8_t{-128})
                     : encode(TensorType::kQ8_K, randomRow(n, 30 + t, t % 3 ? 0.3f : 3.0f));
    });
    std::vector<uint8_t> values(static_cast<size_t>(kAmxValueBytesPerColumn * n));
    k->unpack16_q4_k_amx(n, p.data(), values.data());
    const int64_t stride = 20;  // wider than the tile: the tile writes only its 16 columns
    for (int nt = 1; nt <= kTok; ++nt) {
      // The AMX tile adds into out: the tokens' 16 columns start at 0.
      std::vector<float> tile(static_cast<size_t>(kTok * stride), -7.f);
      for (int t = 0; t < nt; ++t) std::fill_n(tile.begin() + t * stride, rows, 0.0f);
      k->gemm16_values_q4_k_amx(n, p.data(), values.data(), acts.data(), ab, nt, tile.data(),
                                stride);
      expectDecodeDotBits(*k, n, p, acts, nt, kTok, stride, tile, extreme ? "extreme" : "random");
    }
  }
}

// matmul with the AMX table: batches of 16-token tiles and their tails give the AVX-512 table's
// outputs bit for bit, on two threads.
TEST(Q4KX16Test, AmxMatmulMatchesTheAvx512Table) {
  const DotKernels* amx = avx512AmxKernels();
  if (!amx) GTEST_SKIP() << "no AMX-INT8 on this CPU (or Linux older than 5.16)";
  const DotKernels& vnni = *avx512Kernels();
  ThreadPool pool(2);
  std::vector<uint8_t> scratch;
  const int64_t n = 1024, rows = 64;
  const Matrix m = packedMatrix(kQ4K, rows, n, randomRows(rows, n, 7), vnni);
  ASSERT_EQ(m.interleave, kQ4KGroup);
  for (int64_t n_tok : {9, 16, 21, 48}) {
    std::vector<float> x(static_cast<size_t>(n_tok * n));
    for (int64_t t = 0; t < n_tok; ++t) {
      auto row = randomRow(n, static_cast<uint32_t>(400 + t));
      std::copy(row.begin(), row.end(), x.begin() + t * n);
    }
    std::vector<float> want(static_cast<size_t>(n_tok * rows)), got(want.size());
    matmul(m, x.data(), n_tok, want.data(), rows, pool, scratch, vnni);
    matmul(m, x.data(), n_tok, got.data(), rows, pool, scratch, *amx);
    EXPECT_EQ(got, want) << n_tok << " tokens";
  }
}

}  // namespace
}  // namespace tpnode::model::kernels
