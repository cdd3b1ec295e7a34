// The 16-row repacked Q6_K layout, in its split (AVX-512) and linear (256-bit tables)
// arrangements, and its prefill tiles: each repack round-trips the file's bytes, and the linear
// one holds each value where q6k_x16.h says; every tile width (1..kKQuantX16Tokens tokens), on the
// group and on its unpacked values, gives each token the one-token tile's bits and the scalar Q6_K
// dot product, on random rows and on extreme blocks (every value 63 or 0, scales -128 / 127,
// activations -128 / 127), for one block and several, on every table with 16-row Q6_K tiles.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "model/kernels/cpu/dot.h"
#include "model/kernels/cpu/q6k_x16.h"
#include "model/kernels/cpu/quantize.h"
#include "tests/model/quant_rows.h"

namespace tpnode::model::kernels {
namespace {

using testing::encode;
using testing::randomRow;

constexpr TensorType kQ6K = TensorType::kQ6_K;
constexpr int64_t kRows = kQ6KGroup;

std::vector<uint8_t> randomRows(int64_t n, uint32_t seed) {
  std::vector<uint8_t> w;
  for (int64_t r = 0; r < kRows; ++r) {
    auto enc = encode(kQ6K, randomRow(n, seed + static_cast<uint32_t>(r), r % 3 ? 0.05f : 0.5f));
    w.insert(w.end(), enc.begin(), enc.end());
  }
  return w;
}

// Q6_K blocks at the extremes: every value 63 (all ql / qh bits set) on even rows and 0 on odd
// ones, sub-block scales alternating 127 / -128.
std::vector<uint8_t> extremeRows(int64_t n) {
  std::vector<BlockQ6K> b(static_cast<size_t>(kRows * n / kQKK));
  for (size_t i = 0; i < b.size(); ++i) {
    const bool ones = (i / static_cast<size_t>(n / kQKK)) % 2 == 0;
    std::memset(b[i].ql, ones ? 0xFF : 0, sizeof b[i].ql);
    std::memset(b[i].qh, ones ? 0xFF : 0, sizeof b[i].qh);
    for (int j = 0; j < kQKK / 16; ++j) b[i].scales[j] = static_cast<int8_t>(j % 2 ? -128 : 127);
    b[i].d = f32ToFp16(0.5f);
  }
  std::vector<uint8_t> w(b.size() * sizeof(BlockQ6K));
  std::memcpy(w.data(), b.data(), w.size());
  return w;
}

// kKQuantX16Tokens Q8_K rows: random ones, or every value `v` (bsums consistent).
std::vector<uint8_t> activations(int64_t n, int v) {
  std::vector<uint8_t> acts;
  for (int t = 0; t < kKQuantX16Tokens; ++t) {
    std::vector<uint8_t> a;
    if (v == 0) {
      a = encode(TensorType::kQ8_K, randomRow(n, 70 + t, t % 2 ? 0.3f : 3.0f));
    } else {
      std::vector<BlockQ8K> b(static_cast<size_t>(n / kQKK));
      for (BlockQ8K& y : b) {
        y.d = 0.25f;
        std::memset(y.qs, static_cast<uint8_t>(v), sizeof y.qs);
        for (int16_t& s : y.bsums) s = static_cast<int16_t>(16 * v);
      }
      a.resize(b.size() * sizeof(BlockQ8K));
      std::memcpy(a.data(), b.data(), a.size());
    }
    acts.insert(acts.end(), a.begin(), a.end());
  }
  return acts;
}

// Every tile width against the one-token tile (bit for bit) and the scalar kernel (closely), and
// the tiles on the group's unpacked values against the tiles on the group (bit for bit).
void checkTiles(const DotKernels& k, const std::vector<uint8_t>& w, int64_t n,
                const std::vector<uint8_t>& acts, const char* what) {
  std::vector<uint8_t> p(w.size());
  (k.q6k_x16_linear ? repackQ6Kx16Linear : repackQ6Kx16)(w.data(), p.data(), kRows, n);
  std::vector<uint8_t> values(static_cast<size_t>(kX16Q6KValueBytesPerColumn * n));
  k.unpack16_q6_k(n, p.data(), values.data());
  const size_t ab = rowBytes(TensorType::kQ8_K, n);
  const int64_t stride = 20;  // wider than the tile: the tile writes only its 16 columns
  std::vector<float> one(static_cast<size_t>(kKQuantX16Tokens * kRows));
  for (int t = 0; t < kKQuantX16Tokens; ++t) {
    k.gemm16_q6_k(n, p.data(), acts.data() + t * ab, ab, 1, &one[t * kRows], 0);
    float want[kRows];
    scalarKernels().q6_k(n, w.data(), rowBytes(kQ6K, n), kRows, acts.data() + t * ab, want);
    for (int64_t r = 0; r < kRows; ++r) {
      EXPECT_NEAR(one[t * kRows + r], want[r], 1e-5 * (std::fabs(want[r]) + 1))
          << what << " n=" << n << " token " << t << " row " << r;
    }
  }
  for (int nt = 1; nt <= kKQuantX16Tokens; ++nt) {
    std::vector<float> tile(static_cast<size_t>(kKQuantX16Tokens * stride), -7.f);
    std::vector<float> on_values(tile);
    k.gemm16_q6_k(n, p.data(), acts.data(), ab, nt, tile.data(), stride);
    k.gemm16_values_q6_k(n, p.data(), values.data(), acts.data(), ab, nt, on_values.data(), stride);
    for (int t = 0; t < kKQuantX16Tokens; ++t) {
      for (int64_t r = 0; r < stride; ++r) {
        const size_t i = static_cast<size_t>(t * stride + r);
        const float want = t < nt && r < kRows ? one[t * kRows + r] : -7.f;
        EXPECT_EQ(tile[i], want) << what << " n=" << n << " nt=" << nt << " token " << t
                                 << " column " << r;
        EXPECT_EQ(on_values[i], want)
            << what << " (unpacked) n=" << n << " nt=" << nt << " token " << t << " column " << r;
      }
    }
  }
}

TEST(Q6KX16Test, UnpackRestoresTheFileBytes) {
  const int64_t cols = 512;
  std::vector<uint8_t> src(rowBytes(kQ6K, cols) * kRows);
  std::mt19937 rng(5);
  for (uint8_t& b : src) b = static_cast<uint8_t>(rng());
  for (bool linear : {false, true}) {
    std::vector<uint8_t> packed(src.size()), back(src.size());
    (linear ? repackQ6Kx16Linear : repackQ6Kx16)(src.data(), packed.data(), kRows, cols);
    (linear ? unpackQ6Kx16Linear : unpackQ6Kx16)(packed.data(), back.data(), kRows, cols);
    EXPECT_EQ(back, src) << (linear ? "linear" : "split");
  }
}

// Value v (0..63) of row r's block b, from the file's bytes (ggml's Q6_K layout).
int fileValue(const std::vector<uint8_t>& w, int64_t cols, int r, int64_t b, int v) {
  BlockQ6K x;
  std::memcpy(&x, w.data() + static_cast<size_t>(r) * rowBytes(kQ6K, cols) + b * sizeof x,
              sizeof x);
  const int h = v / 128, i = v % 128;
  const int low = i < 64 ? x.ql[64 * h + i % 64] & 0x0F : x.ql[64 * h + i % 64] >> 4;
  return low | ((x.qh[32 * h + i % 32] >> (2 * (i / 32))) & 3) << 4;
}

TEST(Q6KX16Test, LinearArrangementHoldsEachValueWhereTheHeaderSays) {
  const int64_t cols = 512;
  std::vector<uint8_t> src(rowBytes(kQ6K, cols) * kRows);
  std::mt19937 rng(9);
  for (uint8_t& b : src) b = static_cast<uint8_t>(rng());
  std::vector<uint8_t> packed(src.size());
  repackQ6Kx16Linear(src.data(), packed.data(), kRows, cols);
  for (int64_t b = 0; b < cols / kQKK; ++b) {
    BlockQ6Kx16Linear g;
    std::memcpy(&g, packed.data() + b * sizeof g, sizeof g);
    for (int r = 0; r < kRows; ++r) {
      for (int h = 0; h < 2; ++h) {
        for (int c = 0; c < 8; ++c) {
          for (int k = 0; k < 4; ++k) {
            const int v = 128 * h + 4 * c + k;
            const int f = fileValue(src, cols, r, b, v + 96);
            ASSERT_EQ(g.q[h][c][0][r][k], fileValue(src, cols, r, b, v) | (f & 3) << 6);
            ASSERT_EQ(g.q[h][c][1][r][k], fileValue(src, cols, r, b, v + 32) | (f >> 2 & 3) << 6);
            ASSERT_EQ(g.q[h][c][2][r][k], fileValue(src, cols, r, b, v + 64) | (f >> 4) << 6);
          }
        }
      }
    }
  }
}

// The x86 tables with 16-row Q6_K tiles on this CPU.
std::vector<const DotKernels*> tileTables() {
  std::vector<const DotKernels*> out;
  for (const DotKernels* k : {avx512Kernels(), avx2VnniKernels(), avx2Kernels()}) {
    if (k && k->gemm16_q6_k && k->gemm16_values_q6_k) out.push_back(k);
  }
  return out;
}

TEST(Q6KX16Test, EveryTileWidthMatchesTheOneTokenTileAndScalar) {
  const auto tables = tileTables();
  if (tables.empty()) GTEST_SKIP() << "no x86 table with 16-row Q6_K tiles (AVX2 or AVX-512)";
  for (const DotKernels* k : tables) {
    SCOPED_TRACE(k->isa);
    for (int64_t n : {256, 768, 2816}) {
      checkTiles(*k, randomRows(n, static_cast<uint32_t>(n)), n, activations(n, 0), "random");
    }
  }
}

TEST(Q6KX16Test, ExtremeBlocksStayExact) {
  const auto tables = tileTables();
  if (tables.empty()) GTEST_SKIP() << "no x86 table with 16-row Q6_K tiles (AVX2 or AVX-512)";
  const int64_t n = 2816;
  for (const DotKernels* k : tables) {
    SCOPED_TRACE(k->isa);
    for (int v : {-128, 127}) checkTiles(*k, extremeRows(n), n, activations(n, v), "extreme");
  }
}

}  // namespace
}  // namespace tpnode::model::kernels
