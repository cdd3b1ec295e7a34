// The 16-row repacked Q6_K layout and its AVX-512 prefill tiles: the repack round-trips the file's
// bytes; every tile width (1..kKQuantX16Tokens tokens), on the group and on its unpacked values,
// gives each token the one-token tile's bits and the scalar Q6_K dot product, on random rows and on
// extreme blocks (every value 63 or 0, scales -128 / 127, activations -128 / 127), for one block
// and several.
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
  repackQ6Kx16(w.data(), p.data(), kRows, n);
  std::vector<uint8_t> values(static_cast<size_t>(kX16ValueBytesPerColumn * n));
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
  std::vector<uint8_t> packed(src.size()), back(src.size());
  repackQ6Kx16(src.data(), packed.data(), kRows, cols);
  unpackQ6Kx16(packed.data(), back.data(), kRows, cols);
  EXPECT_EQ(back, src);
}

TEST(Q6KX16Test, EveryTileWidthMatchesTheOneTokenTileAndScalar) {
  const DotKernels* k = avx512Kernels();
  if (!k || !k->gemm16_q6_k || !k->gemm16_values_q6_k) GTEST_SKIP() << "no AVX-512 VNNI";
  for (int64_t n : {256, 768, 2816}) {
    checkTiles(*k, randomRows(n, static_cast<uint32_t>(n)), n, activations(n, 0), "random");
  }
}

TEST(Q6KX16Test, ExtremeBlocksStayExact) {
  const DotKernels* k = avx512Kernels();
  if (!k || !k->gemm16_q6_k || !k->gemm16_values_q6_k) GTEST_SKIP() << "no AVX-512 VNNI";
  const int64_t n = 2816;
  for (int v : {-128, 127}) checkTiles(*k, extremeRows(n), n, activations(n, v), "extreme");
}

}  // namespace
}  // namespace tpnode::model::kernels
