// matmul() against the scalar kernels, for every weight type and every layout packWeights picks:
// row counts that fill whole 8-row tiles, that end in a partial tile (rows % 8 == 4) and that
// stay plain (rows % 4 != 0); token counts that fill the 4- and 8-token prefill tiles and that
// leave a tail of 1-7 tokens; row lengths of one to three blocks and of several, and for F16 /
// BF16 row lengths that end in part of a vector. (A row length that is not a multiple of the type's
// block cannot occur: GGUF refuses such a tensor at load.) Runs on every kernel table this CPU has
// (scalar, avx2, avx2vnni, avx512: each packs and runs its own layouts), and on the best one (which
// TPNODE_CPU_ISA may narrow).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/kernels/cpu/dot.h"
#include "model/kernels/cpu/matmul.h"
#include "model/kernels/cpu/q0_x16.h"
#include "model/kernels/cpu/quantize.h"
#include "tests/model/quant_rows.h"

namespace tpnode::model::kernels {
namespace {

using testing::encode;
using testing::packedMatrix;
using testing::randomRow;

struct Shape {
  int64_t rows, cols;
};

// `rows` rows of random values (row r from seed + r, times `scale`) in `type`'s file encoding.
std::vector<uint8_t> randomRows(TensorType type, int64_t rows, int64_t cols, uint32_t seed,
                                float scale) {
  std::vector<uint8_t> w;
  for (int64_t r = 0; r < rows; ++r) {
    auto enc = encode(type, randomRow(cols, seed + static_cast<uint32_t>(r), scale));
    w.insert(w.end(), enc.begin(), enc.end());
  }
  return w;
}

void checkTable(const DotKernels& k) {
  SCOPED_TRACE(std::string(k.isa));
  ThreadPool pool(2);
  std::vector<uint8_t> scratch;
  const TensorType types[] = {TensorType::kF32,  TensorType::kF16,  TensorType::kBF16,
                              TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kQ5_0,
                              TensorType::kQ5_1, TensorType::kQ4_K, TensorType::kQ6_K};
  const Shape shapes[] = {{16, 256}, {12, 512}, {36, 768}, {18, 256}, {48, 256}, {32, 32},
                          {16, 64},  {20, 96},  {17, 40},  {16, 100}, {7, 8}};
  for (TensorType type : types) {
    for (const Shape& s : shapes) {
      if (s.cols % static_cast<int64_t>(tensorTypeInfo(type).block_size) != 0) continue;
      const std::vector<uint8_t> w = randomRows(type, s.rows, s.cols, 500, 0.1f);
      const size_t row_bytes = rowBytes(type, static_cast<uint64_t>(s.cols));
      Matrix m = packedMatrix(type, s.rows, s.cols, w, k);
      if (s.rows % 4 != 0) {
        EXPECT_EQ(m.interleave, 1);
      }
      if (s.rows % kQ0Group == 0 && q0X16Type(type) &&
          (k.gemm16Q0ForType(type) || k.gemm16ForType(type))) {
        // The 16-row Q8_0 / Q4_0 / Q5_0 / Q5_1 layout, and back to the file's bytes (tensor
        // reads).
        EXPECT_EQ(m.interleave, kQ0Group) << tensorTypeName(type);
        std::vector<uint8_t> back(w.size());
        unpackQ0x16(type, m.data.data(), back.data(), s.rows, s.cols);
        EXPECT_EQ(back, w) << tensorTypeName(type);
      }
      // Every row reads back as the file's bytes (embedding lookups of a packed tied head).
      std::vector<uint8_t> read(row_bytes);
      for (int64_t r = 0; r < s.rows; ++r) {
        matrixRowBytes(m, r, read.data());
        ASSERT_EQ(0, std::memcmp(read.data(), w.data() + r * row_bytes, row_bytes))
            << tensorTypeName(type) << " row " << r << " interleave " << m.interleave;
      }
      for (int64_t n_tok : {1, 2, 4, 7, 9, 13, 21}) {
        std::vector<float> x(static_cast<size_t>(n_tok * s.cols));
        for (int64_t t = 0; t < n_tok; ++t) {
          auto row = randomRow(s.cols, static_cast<uint32_t>(900 + t));
          std::copy(row.begin(), row.end(), x.begin() + t * s.cols);
        }
        std::vector<float> y(static_cast<size_t>(n_tok * s.rows), -7.f);
        matmul(m, x.data(), n_tok, y.data(), s.rows, pool, scratch, k);
        const TensorType at = activationType(type);
        for (int64_t t = 0; t < n_tok; ++t) {
          std::vector<float> xt(x.begin() + t * s.cols, x.begin() + (t + 1) * s.cols);
          std::vector<uint8_t> act = encode(at, xt);
          std::vector<float> want(static_cast<size_t>(s.rows));
          scalarKernels().forType(type)(s.cols, w.data(), row_bytes, static_cast<int>(s.rows),
                                        act.data(), want.data());
          for (int64_t r = 0; r < s.rows; ++r) {
            const float got = y[static_cast<size_t>(t * s.rows + r)];
            ASSERT_NEAR(got, want[r], 1e-4 * (std::fabs(want[r]) + 1))
                << tensorTypeName(type) << " " << s.rows << "x" << s.cols << " tokens " << n_tok
                << " token " << t << " row " << r << " interleave " << m.interleave << " on "
                << k.isa;
          }
        }
      }
    }
  }
}

Matrix randomMatrix(TensorType type, int64_t rows, int64_t cols, uint32_t seed) {
  return packedMatrix(type, rows, cols, randomRows(type, rows, cols, seed, 0.1f));
}

// A MatmulScratch reuses the converted activations (and the x16 offsets) of the previous call
// only when told the input is the same and the weights take the same ones: every call of a
// sequence that mixes activation types, offset types and a new input gives the bits of a matmul
// with a fresh scratch. A call that converts nothing (F32 weights) on a new input still forgets
// the old input's activations.
TEST(MatmulTest, ScratchReusesActivationsOnlyWhereTheyFit) {
  ThreadPool pool(2);
  const int64_t n_tok = 7, cols = 256;
  const Matrix q5a = randomMatrix(TensorType::kQ5_0, 32, cols, 10);
  const Matrix q5b = randomMatrix(TensorType::kQ5_0, 16, cols, 60);
  const Matrix q8 = randomMatrix(TensorType::kQ8_0, 16, cols, 90);
  const Matrix q4k = randomMatrix(TensorType::kQ4_K, 16, cols, 120);
  const Matrix f32 = randomMatrix(TensorType::kF32, 16, cols, 150);
  std::vector<float> x(static_cast<size_t>(n_tok * cols));
  auto fill = [&](uint32_t seed) {
    for (int64_t t = 0; t < n_tok; ++t) {
      auto row = randomRow(cols, seed + static_cast<uint32_t>(t));
      std::copy(row.begin(), row.end(), x.begin() + t * cols);
    }
  };
  MatmulScratch shared;
  int step = 0;
  auto check = [&](const Matrix& m, bool same_x) {
    std::vector<float> got(static_cast<size_t>(n_tok * m.rows)), want(got.size());
    matmul(m, x.data(), n_tok, got.data(), m.rows, pool, shared, same_x);
    std::vector<uint8_t> fresh;
    matmul(m, x.data(), n_tok, want.data(), m.rows, pool, fresh);
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
        << "step " << step << ": " << tensorTypeName(m.type);
    ++step;
  };
  fill(1);
  check(q5a, false);
  check(q5b, true);  // activations and Q5_0 offsets reused
  check(q8, true);   // activations reused, Q8_0 offsets computed
  check(q4k, true);  // Q8_K activations
  check(q5a, true);  // Q8_0 activations again
  fill(2);
  check(f32, false);  // nothing converted, but the input is new
  check(q5b, true);
  check(q8, true);
}

// matmulScratchBytes is what a matmul grows a fresh scratch to: the converted activations (and
// the x16 offsets after them) for every weight type and layout this table packs, prefill and
// decode; nothing for F32 weights, which read x as it is.
TEST(MatmulTest, ScratchBytesAreWhatTheMatmulTakes) {
  ThreadPool pool(2);
  const int64_t cols = 256;
  const TensorType types[] = {TensorType::kF32,  TensorType::kF16,  TensorType::kBF16,
                              TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kQ5_0,
                              TensorType::kQ5_1, TensorType::kQ4_K, TensorType::kQ6_K};
  for (TensorType type : types) {
    for (int64_t rows : {16, 12, 7}) {
      const Matrix m = randomMatrix(type, rows, cols, 30);
      for (int64_t n_tok : {1, 5, 64}) {
        std::vector<float> x(static_cast<size_t>(n_tok * cols), 0.25f);
        std::vector<float> y(static_cast<size_t>(n_tok * rows));
        MatmulScratch fresh;
        matmul(m, x.data(), n_tok, y.data(), rows, pool, fresh, false);
        EXPECT_EQ(fresh.bytes.size(), matmulScratchBytes(m, n_tok))
            << tensorTypeName(type) << " rows " << rows << " interleave " << m.interleave
            << " tokens " << n_tok;
        if (type == TensorType::kF32) {
          EXPECT_EQ(matmulScratchBytes(m, n_tok), 0u);
        }
      }
    }
  }
}

// llama.cpp's x86 Q8_0 dot product (ggml_vec_dot_q8_0_q8_0, tinyBLAS_Q0_AVX), written out: 8 float
// lanes, lane k = fma(d_w * d_a, float(integer sum of columns 4k..4k+3 of the block), lane k) in
// block order, folded as ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)).
float llamaCppQ8_0Dot(int64_t n, const BlockQ8_0* w, const BlockQ8_0* a) {
  float lane[8] = {};
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const float d = fp16ToF32(w[b].d) * fp16ToF32(a[b].d);
    for (int k = 0; k < 8; ++k) {
      int s = 0;
      for (int i = 4 * k; i < 4 * k + 4; ++i) s += w[b].qs[i] * a[b].qs[i];
      lane[k] = std::fma(d, static_cast<float>(s), lane[k]);
    }
  }
  return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

// Restores this process's decode prefetch setting when a test leaves the scope (an ASSERT
// returns early too).
class DecodePrefetchRestorer {
 public:
  DecodePrefetchRestorer() : own_(decodePrefetch()) {}
  ~DecodePrefetchRestorer() { setDecodePrefetch(own_); }
  DecodePrefetchRestorer(const DecodePrefetchRestorer&) = delete;
  DecodePrefetchRestorer& operator=(const DecodePrefetchRestorer&) = delete;

 private:
  DecodePrefetch own_;
};

// The x86 tables (AVX2, AVX2 + AVX-VNNI, AVX-512, as this CPU has them) sum Q8_0 in llama.cpp's
// order in every layout (plain, 4-row, 16-row), tile (1-4 tokens and tails) and panel (any number
// of tokens; weights with and without -128, which the AVX2 panel checks for; rows too long for
// the panel's scale table, which convert their scales per pass), decode with either prefetch (the
// 4-row decode prefetches under kNearOnly): the same bits as llamaCppQ8_0Dot
// (tests/model/reference_parity_test relies on it). The scalar table sums in another order.
TEST(MatmulTest, Q8_0SumsInLlamaCppOrderOnX86) {
  const DecodePrefetchRestorer restore;
  std::vector<const DotKernels*> tables;
  for (const DotKernels* k : {avx2Kernels(), avx2VnniKernels(), avx512Kernels()}) {
    if (k) tables.push_back(k);
  }
  if (tables.empty()) GTEST_SKIP() << "no x86 kernel table on this CPU";
  ThreadPool pool(2);
  std::vector<uint8_t> scratch;
  struct Case {
    Shape shape;
    bool min_weights;  // some weights -128 (llama.cpp's quantizer never writes it; files may)
  };
  const Case cases[] = {{{48, 256}, false},  {{16, 1024}, false}, {{12, 512}, false},
                        {{18, 256}, false},  {{80, 256}, false},  {{16, 512}, true},
                        {{8, 16416}, false}, {{8, 16416}, true}};
  for (const DotKernels* k : tables) {
    for (const Case& c : cases) {
      const Shape& s = c.shape;
      std::vector<uint8_t> w = randomRows(TensorType::kQ8_0, s.rows, s.cols, 700, 1.0f);
      const size_t row_bytes = rowBytes(TensorType::kQ8_0, static_cast<uint64_t>(s.cols));
      if (c.min_weights) {  // -128 in one row of every group of 4, at most rows' blocks
        for (int64_t r = 1; r < s.rows; r += 4) {
          auto* blocks = reinterpret_cast<BlockQ8_0*>(w.data() + r * row_bytes);
          for (int64_t b = 0; b < s.cols / kQK8_0; b += 3) blocks[b].qs[b % 32] = -128;
        }
      }
      Matrix m = packedMatrix(TensorType::kQ8_0, s.rows, s.cols, w, *k);
      // The 4-row decode takes its one-sign kernel only where no weight is -128.
      EXPECT_EQ(m.q8_no_min, m.interleave == 4 && !c.min_weights) << k->isa;
      for (int64_t n_tok : {1, 2, 3, 4, 7, 9}) {
        std::vector<float> x(static_cast<size_t>(n_tok * s.cols));
        for (int64_t t = 0; t < n_tok; ++t) {
          auto row = randomRow(s.cols, static_cast<uint32_t>(300 + t), 3.0f);
          std::copy(row.begin(), row.end(), x.begin() + t * s.cols);
        }
        for (DecodePrefetch pf : {DecodePrefetch::kNearAndFar, DecodePrefetch::kNearOnly,
                                  DecodePrefetch::kFarKQuants}) {
          setDecodePrefetch(pf);
          std::vector<float> y(static_cast<size_t>(n_tok * s.rows), -7.f);
          matmul(m, x.data(), n_tok, y.data(), s.rows, pool, scratch, *k);
          for (int64_t t = 0; t < n_tok; ++t) {
            std::vector<float> xt(x.begin() + t * s.cols, x.begin() + (t + 1) * s.cols);
            const std::vector<uint8_t> act = encode(TensorType::kQ8_0, xt);
            for (int64_t r = 0; r < s.rows; ++r) {
              const float want = llamaCppQ8_0Dot(
                  s.cols, reinterpret_cast<const BlockQ8_0*>(w.data() + r * row_bytes),
                  reinterpret_cast<const BlockQ8_0*>(act.data()));
              ASSERT_EQ(y[static_cast<size_t>(t * s.rows + r)], want)
                  << s.rows << "x" << s.cols << (c.min_weights ? " with -128" : "") << " tokens "
                  << n_tok << " token " << t << " row " << r << " interleave " << m.interleave
                  << " on " << k->isa << " prefetch " << static_cast<int>(pf);
            }
          }
        }
      }
    }
  }
}

// The decode kernels on the 16-row layouts (gemv16) give the one-token tile's bits for every
// group of a range, whatever the range's length (Q8_0 reads it as two streams, its halves, then
// an odd last group alone) and start, with either software prefetch (DecodePrefetch); row lengths
// of one block and of several (odd counts too).
TEST(MatmulTest, Gemv16MatchesTheOneTokenTileBitForBit) {
  const DecodePrefetchRestorer restore;
  int checked = 0;
  for (const DotKernels* k :
       {&scalarKernels(), avx2Kernels(), avx2VnniKernels(), avx512Kernels()}) {
    if (!k) continue;
    for (TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kQ5_0,
                            TensorType::kQ4_K, TensorType::kQ6_K}) {
      const Gemv16Fn gemv = k->gemv16ForType(type);
      if (!gemv) continue;
      const Gemm16Q0Fn tile_q0 = k->gemm16Q0ForType(type);
      const GemmTileFn tile = k->gemm16ForType(type);
      ASSERT_TRUE(tile_q0 || tile) << tensorTypeName(type) << " on " << k->isa;
      const bool k_quant = type == TensorType::kQ4_K || type == TensorType::kQ6_K;
      for (int64_t cols : {32, 96, 256, 512, 768, 1024}) {
        if (k_quant && cols % 256 != 0) continue;
        const int64_t rows = 7 * 16;
        const std::vector<uint8_t> w = randomRows(type, rows, cols, 40, 0.2f);
        Matrix m = packedMatrix(type, rows, cols, w, *k);
        ASSERT_EQ(m.interleave, 16) << tensorTypeName(type) << " on " << k->isa;
        const std::vector<uint8_t> act =
            encode(activationType(type), randomRow(cols, static_cast<uint32_t>(11), 2.0f));
        std::vector<int32_t> offs;
        if (tile_q0) {
          offs.resize(static_cast<size_t>(q0X16OffsetsPerRow(type, cols)));
          q0X16Offsets(type, act.data(), act.size(), 1, cols, offs.data());
        }
        std::vector<float> want(static_cast<size_t>(rows));
        for (int64_t g = 0; g < rows / 16; ++g) {
          if (tile_q0) {
            tile_q0(cols, m.row(16 * g), act.data(), act.size(), offs.data(), 1, &want[16 * g], 0);
          } else {
            tile(cols, m.row(16 * g), act.data(), act.size(), 1, &want[16 * g], 0);
          }
        }
        for (DecodePrefetch pf : {DecodePrefetch::kNearAndFar, DecodePrefetch::kNearOnly,
                                  DecodePrefetch::kFarKQuants}) {
          setDecodePrefetch(pf);
          for (int64_t g0 = 0; g0 < 3; ++g0) {
            for (int64_t n = 1; g0 + n <= rows / 16; ++n) {
              std::vector<float> got(static_cast<size_t>(16 * n), -7.f);
              gemv(cols, m.row(16 * g0), m.row_bytes * 16, n, act.data(),
                   tile_q0 ? offs.data() : nullptr, got.data());
              ASSERT_EQ(0, std::memcmp(got.data(), &want[16 * g0], got.size() * sizeof(float)))
                  << tensorTypeName(type) << " cols " << cols << " groups [" << g0 << ", " << g0 + n
                  << ") on " << k->isa << " prefetch " << static_cast<int>(pf);
              ++checked;
            }
          }
        }
      }
    }
  }
  if (checked == 0) GTEST_SKIP() << "no decode kernel on this CPU";
}

// Q8_0 / Q4_0 / Q5_0 prefill on the 16-row layout: every token of a matmul over n tokens (whole
// tiles of kQ0X16Tokens and every tail width 1-7 after them) gets, bit for bit, what a matmul of
// that token alone gives (the decode kernel, itself bit-identical to the one-token tile): a tile's
// width changes no token's arithmetic. Row lengths of one block, of an odd number of blocks and of
// several; one and several groups.
TEST(MatmulTest, Q0PrefillTileWidthChangesNoBits) {
  ThreadPool pool(1);
  std::vector<uint8_t> scratch;
  int checked = 0;
  for (const DotKernels* k :
       {&scalarKernels(), avx2Kernels(), avx2VnniKernels(), avx512Kernels()}) {
    if (!k) continue;
    for (TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kQ5_0}) {
      if (!k->gemm16Q0ForType(type)) continue;
      const Shape shapes[] = {{16, 32}, {48, 96}, {32, 1056}};
      for (const Shape& s : shapes) {
        const std::vector<uint8_t> w = randomRows(type, s.rows, s.cols, 90, 0.2f);
        Matrix m = packedMatrix(type, s.rows, s.cols, w, *k);
        ASSERT_EQ(m.interleave, 16) << tensorTypeName(type) << " on " << k->isa;
        for (int64_t n_tok : {2, 3, 5, 6, 7, 8, 9, 13, 16, 23}) {
          std::vector<float> x(static_cast<size_t>(n_tok * s.cols));
          for (int64_t t = 0; t < n_tok; ++t) {
            const std::vector<float> row = randomRow(s.cols, static_cast<uint32_t>(300 + t), 2.0f);
            std::copy(row.begin(), row.end(), x.begin() + t * s.cols);
          }
          std::vector<float> y(static_cast<size_t>(n_tok * s.rows), -7.f);
          matmul(m, x.data(), n_tok, y.data(), s.rows, pool, scratch, *k);
          for (int64_t t = 0; t < n_tok; ++t) {
            std::vector<float> one(static_cast<size_t>(s.rows), -7.f);
            matmul(m, x.data() + t * s.cols, 1, one.data(), s.rows, pool, scratch, *k);
            ASSERT_EQ(0, std::memcmp(one.data(), y.data() + t * s.rows, one.size() * sizeof(float)))
                << tensorTypeName(type) << " " << s.rows << "x" << s.cols << " tokens " << n_tok
                << " token " << t << " on " << k->isa;
            ++checked;
          }
        }
      }
    }
  }
  if (checked == 0) GTEST_SKIP() << "no 16-row Q8_0 / Q4_0 / Q5_0 tile on this CPU";
}

// `tokens` activation rows of `cols` columns for a Q8_0 / Q4_0 / Q5_0 tile (alternately large and
// small values), one after another `bytes` apart, and their q0X16Offsets.
struct Q0Acts {
  std::vector<uint8_t> rows;
  size_t bytes = 0;
  std::vector<int32_t> offs;
};
Q0Acts q0Acts(TensorType type, int64_t cols, int tokens, uint32_t seed) {
  Q0Acts a;
  a.bytes = rowBytes(activationType(type), static_cast<uint64_t>(cols));
  for (int t = 0; t < tokens; ++t) {
    const auto row = encode(activationType(type),
                            randomRow(cols, seed + static_cast<uint32_t>(t), t % 2 ? 0.3f : 3.f));
    a.rows.insert(a.rows.end(), row.begin(), row.end());
  }
  a.offs.resize(static_cast<size_t>(q0X16OffsetsPerRow(type, cols) * tokens));
  q0X16Offsets(type, a.rows.data(), a.bytes, tokens, cols, a.offs.data());
  return a;
}

// Q5_0 prefill past one tile on the tables that unpack a group once (unpack16_q5_0 +
// gemm16_values_q5_0): every tile width 1..kQ0X16Tokens on the unpacked values gives each token
// the packed tile's bits, writing only its 16 columns; one block, an odd number of blocks and many.
TEST(MatmulTest, Q0ValuesTileMatchesThePackedTileBitForBit) {
  int checked = 0;
  for (const DotKernels* k : {avx2Kernels(), avx2VnniKernels(), avx512Kernels()}) {
    if (!k) continue;
    for (TensorType type : {TensorType::kQ5_0}) {
      const Unpack16Fn unpack = k->unpack16Q0ForType(type);
      const Gemm16ValuesQ0Fn on_values = k->gemm16ValuesQ0ForType(type);
      const Gemm16Q0Fn packed = k->gemm16Q0ForType(type);
      ASSERT_EQ(unpack != nullptr, on_values != nullptr)
          << tensorTypeName(type) << " on " << k->isa;
      if (!on_values) continue;
      ASSERT_NE(packed, nullptr) << tensorTypeName(type) << " on " << k->isa;
      for (int64_t cols : {32, 96, 1056}) {
        const std::vector<uint8_t> w = randomRows(type, 16, cols, 700, 0.2f);
        const Matrix m = packedMatrix(type, 16, cols, w, *k);
        ASSERT_EQ(m.interleave, 16) << tensorTypeName(type) << " on " << k->isa;
        const Q0Acts x = q0Acts(type, cols, kQ0X16Tokens, 800);
        const uint8_t* acts = x.rows.data();
        const size_t ab = x.bytes;
        const int32_t* offs = x.offs.data();
        std::vector<uint8_t> values(static_cast<size_t>(kX16ValueBytesPerColumn * cols));
        unpack(cols, m.row(0), values.data());
        const int64_t stride = 20;  // wider than the tile: it writes only its 16 columns
        for (int nt = 1; nt <= kQ0X16Tokens; ++nt) {
          std::vector<float> want(static_cast<size_t>(kQ0X16Tokens * stride), -7.f);
          std::vector<float> got(want);
          packed(cols, m.row(0), acts, ab, offs, nt, want.data(), stride);
          on_values(cols, m.row(0), values.data(), acts, ab, offs, nt, got.data(), stride);
          ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
              << tensorTypeName(type) << " cols " << cols << " tokens " << nt << " on " << k->isa;
          EXPECT_EQ(got[16], -7.f);
          ++checked;
        }
      }
    }
  }
  if (checked == 0) GTEST_SKIP() << "no table unpacks Q5_0 groups on this CPU (needs AVX2)";
}

// A two-group tile against the 16-row one on each group: for a 32-row `type` matrix of one
// block, an odd number of blocks and many, and every width 1..kQ0X32Tokens, pair(m, x, nt, out,
// stride) gives out[t * stride + 16 g + r] the bits single(m, g, x, nt, out + 16 g, stride) gives,
// writing only its 32 columns. Returns the cases checked.
template <typename Single, typename Pair>
int expectPairTileBits(const DotKernels& k, TensorType type, uint32_t seed, Single single,
                       Pair pair) {
  int checked = 0;
  for (int64_t cols : {32, 96, 1056}) {
    const std::vector<uint8_t> w = randomRows(type, 32, cols, seed, 0.2f);
    const Matrix m = packedMatrix(type, 32, cols, w, k);
    EXPECT_EQ(m.interleave, 16) << k.isa;
    if (m.interleave != 16) return checked;
    const Q0Acts x = q0Acts(type, cols, kQ0X32Tokens, seed + 100);
    const int64_t stride = 36;  // wider than the tile: it writes only its 32 columns
    for (int nt = 1; nt <= kQ0X32Tokens; ++nt) {
      std::vector<float> want(static_cast<size_t>(kQ0X32Tokens * stride), -7.f);
      std::vector<float> got(want);
      single(m, 0, x, nt, want.data(), stride);
      single(m, 1, x, nt, want.data() + 16, stride);
      pair(m, x, nt, got.data(), stride);
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
          << tensorTypeName(type) << " cols " << cols << " tokens " << nt << " on " << k.isa;
      EXPECT_EQ(got[32], -7.f);
      ++checked;
    }
  }
  return checked;
}

// The Q4_0 tile on two groups at once (gemm32_q4_0, AVX-512) against the 16-row tile on each.
// (matmul takes it for pairs of groups: Q0PrefillTileWidthChangesNoBits covers it through matmul,
// an odd last group included.)
TEST(MatmulTest, Q4_0PairTileGivesEachGroupTheSixteenRowTileBits) {
  int checked = 0;
  for (const DotKernels* k : {avx2Kernels(), avx2VnniKernels(), avx512Kernels()}) {
    if (!k || !k->gemm32_q4_0) continue;
    const Gemm16Q0Fn single = k->gemm16Q0ForType(TensorType::kQ4_0);
    ASSERT_NE(single, nullptr) << k->isa;
    checked += expectPairTileBits(
        *k, TensorType::kQ4_0, 710,
        [&](const Matrix& m, int g, const Q0Acts& x, int nt, float* out, int64_t stride) {
          single(m.cols, m.row(16 * g), x.rows.data(), x.bytes, x.offs.data(), nt, out, stride);
        },
        [&](const Matrix& m, const Q0Acts& x, int nt, float* out, int64_t stride) {
          k->gemm32_q4_0(m.cols, m.row(0), m.row_bytes * 16, x.rows.data(), x.bytes, x.offs.data(),
                         nt, out, stride);
        });
  }
  if (checked == 0) GTEST_SKIP() << "no two-group Q4_0 tile on this CPU (needs AVX-512 VNNI)";
}

// The Q5_0 tile on two groups' unpacked values at once (gemm32_values_q5_0, AVX-512) against the
// 16-row values tile on each group's own values. (matmul takes it for pairs of groups past one
// tile: Q0PrefillTileWidthChangesNoBits.)
TEST(MatmulTest, Q5_0PairValuesTileGivesEachGroupTheSixteenRowTileBits) {
  int checked = 0;
  for (const DotKernels* k : {avx2Kernels(), avx2VnniKernels(), avx512Kernels()}) {
    if (!k || !k->gemm32_values_q5_0) continue;
    const Unpack16Fn unpack = k->unpack16Q0ForType(TensorType::kQ5_0);
    const Gemm16ValuesQ0Fn single = k->gemm16ValuesQ0ForType(TensorType::kQ5_0);
    ASSERT_TRUE(unpack && single) << k->isa;
    // Both groups' values, the second's vb bytes after the first's (as matmul lays them out).
    const auto values = [&](const Matrix& m, size_t vb) {
      std::vector<uint8_t> v(2 * vb);
      unpack(m.cols, m.row(0), v.data());
      unpack(m.cols, m.row(16), v.data() + vb);
      return v;
    };
    checked += expectPairTileBits(
        *k, TensorType::kQ5_0, 720,
        [&](const Matrix& m, int g, const Q0Acts& x, int nt, float* out, int64_t stride) {
          const size_t vb = static_cast<size_t>(kX16ValueBytesPerColumn * m.cols);
          const std::vector<uint8_t> v = values(m, vb);
          single(m.cols, m.row(16 * g), v.data() + g * vb, x.rows.data(), x.bytes, x.offs.data(),
                 nt, out, stride);
        },
        [&](const Matrix& m, const Q0Acts& x, int nt, float* out, int64_t stride) {
          const size_t vb = static_cast<size_t>(kX16ValueBytesPerColumn * m.cols);
          const std::vector<uint8_t> v = values(m, vb);
          k->gemm32_values_q5_0(m.cols, m.row(0), m.row_bytes * 16, v.data(), vb, x.rows.data(),
                                x.bytes, x.offs.data(), nt, out, stride);
        });
  }
  if (checked == 0) GTEST_SKIP() << "no two-group Q5_0 tile on this CPU (needs AVX-512 VNNI)";
}

// Q4_0, Q5_0, Q4_K and Q6_K on the 16-row layouts: the 256-bit kernels (AVX2, AVX-VNNI: 8 rows per
// vector) and the AVX-512 ones (16) give the same bits, prefill (tiles, and the K-quants' unpacked
// values past 8 tokens) and decode: the same integer block sums, the same float operations in the
// same order (for Q4_0 llama.cpp's q4_0_8x8 order on every table).
// A Q6_K matrix packs in the arrangement its table's kernels read (the 256-bit tables: linear,
// AVX-512: split); run with a table that reads the other, matmul refuses it instead of computing
// with misread weights.
TEST(MatmulTest, Q6KArrangementFollowsTheTableAndAMismatchIsRefused) {
  std::vector<const DotKernels*> tables;
  for (const DotKernels* k : {avx512Kernels(), avx2VnniKernels(), avx2Kernels()}) {
    if (k && k->gemm16_q6_k) tables.push_back(k);
  }
  if (tables.empty()) GTEST_SKIP() << "no x86 table with 16-row Q6_K kernels";
  ThreadPool pool(1);
  std::vector<uint8_t> scratch;
  const std::vector<uint8_t> w = randomRows(TensorType::kQ6_K, 16, 256, 5, 0.3f);
  const std::vector<float> x = randomRow(256, 6, 1.0f);
  std::vector<float> y(16);
  for (const DotKernels* k : tables) {
    Matrix m = packedMatrix(TensorType::kQ6_K, 16, 256, w, *k);
    ASSERT_EQ(m.interleave, 16) << k->isa;
    EXPECT_EQ(m.q6k_linear, k->q6k_x16_linear) << k->isa;
    EXPECT_NO_THROW(matmul(m, x.data(), 1, y.data(), 16, pool, scratch, *k)) << k->isa;
    m.q6k_linear = !m.q6k_linear;
    EXPECT_THROW(matmul(m, x.data(), 1, y.data(), 16, pool, scratch, *k), tpnode::Error) << k->isa;
  }
}

TEST(MatmulTest, SixteenRowKernelsGiveTheSameBitsOnEveryX86Table) {
  std::vector<const DotKernels*> tables;
  for (const DotKernels* k : {avx512Kernels(), avx2VnniKernels(), avx2Kernels()}) {
    if (k && k->gemm16_q4_0 && k->gemm16_q4_k && k->gemm16_q6_k) tables.push_back(k);
  }
  if (tables.size() < 2) GTEST_SKIP() << "fewer than two x86 tables with 16-row kernels";
  ThreadPool pool(2);
  std::vector<uint8_t> scratch;
  for (TensorType type :
       {TensorType::kQ4_0, TensorType::kQ5_0, TensorType::kQ4_K, TensorType::kQ6_K}) {
    const bool k_quant = type == TensorType::kQ4_K || type == TensorType::kQ6_K;
    const std::vector<Shape> shapes = k_quant ? std::vector<Shape>{{16, 256}, {48, 768}, {80, 2304}}
                                              : std::vector<Shape>{{16, 32}, {48, 96}, {80, 2080}};
    for (const Shape& s : shapes) {
      const std::vector<uint8_t> w = randomRows(type, s.rows, s.cols, 77, 0.3f);
      for (int64_t n_tok : {1, 3, 4, 8, 13, 21}) {
        std::vector<float> x(static_cast<size_t>(n_tok * s.cols));
        for (int64_t t = 0; t < n_tok; ++t) {
          const std::vector<float> row = randomRow(s.cols, static_cast<uint32_t>(60 + t), 2.0f);
          std::copy(row.begin(), row.end(), x.begin() + t * s.cols);
        }
        std::vector<std::vector<float>> got;
        for (const DotKernels* k : tables) {
          Matrix m = packedMatrix(type, s.rows, s.cols, w, *k);
          ASSERT_EQ(m.interleave, 16) << tensorTypeName(type) << " on " << k->isa;
          got.emplace_back(static_cast<size_t>(n_tok * s.rows), -7.f);
          matmul(m, x.data(), n_tok, got.back().data(), s.rows, pool, scratch, *k);
        }
        for (size_t i = 1; i < tables.size(); ++i) {
          ASSERT_EQ(0, std::memcmp(got[0].data(), got[i].data(), got[0].size() * sizeof(float)))
              << tensorTypeName(type) << " " << s.rows << "x" << s.cols << " tokens " << n_tok
              << ": " << tables[i]->isa << " against " << tables[0]->isa;
        }
      }
    }
  }
}

// Decode (one token) through matmul on one thread, so that the decode kernel (gemv16 where the
// table has one) gets a whole matrix per call: group counts 1-7 (two streams and an odd last
// group), row lengths of an odd number of blocks (Q4_0 takes two blocks per step), and a row
// longer than 32k columns; every row against the scalar reference. Row counts that are not a
// multiple of 16 (no 16-row layout: the 4-row and plain kernels) ride along.
TEST(MatmulTest, DecodeOnOneThreadMatchesScalarRowsForEveryGroupCount) {
  ThreadPool pool(1);
  std::vector<uint8_t> scratch;
  for (const DotKernels* k :
       {&scalarKernels(), avx2Kernels(), avx2VnniKernels(), avx512Kernels()}) {
    if (!k) continue;
    for (TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kQ5_0,
                            TensorType::kQ4_K, TensorType::kQ6_K}) {
      const bool k_quant = type == TensorType::kQ4_K || type == TensorType::kQ6_K;
      const Shape shapes[] = {{16, 32},  {32, 96},  {48, 256},  {64, 768},  {80, 1024},
                              {96, 512}, {112, 96}, {40, 1024}, {48, 33024}};
      for (const Shape& s : shapes) {
        if (k_quant && s.cols % 256 != 0) continue;
        if (s.cols > 4096 && !k->gemv16ForType(type)) continue;  // the long row is for gemv16
        const std::vector<uint8_t> w = randomRows(type, s.rows, s.cols, 70, 0.2f);
        const size_t row_bytes = rowBytes(type, static_cast<uint64_t>(s.cols));
        Matrix m = packedMatrix(type, s.rows, s.cols, w, *k);
        const std::vector<float> x = randomRow(s.cols, 77, 2.0f);
        std::vector<float> y(static_cast<size_t>(s.rows), -7.f);
        matmul(m, x.data(), 1, y.data(), s.rows, pool, scratch, *k);
        const std::vector<uint8_t> act = encode(activationType(type), x);
        std::vector<float> want(static_cast<size_t>(s.rows));
        scalarKernels().forType(type)(s.cols, w.data(), row_bytes, static_cast<int>(s.rows),
                                      act.data(), want.data());
        for (int64_t r = 0; r < s.rows; ++r) {
          ASSERT_NEAR(y[r], want[r], 1e-4 * (std::fabs(want[r]) + 1))
              << tensorTypeName(type) << " " << s.rows << "x" << s.cols << " row " << r
              << " interleave " << m.interleave << " on " << k->isa;
        }
      }
    }
  }
}

TEST(MatmulTest, EveryTypeLayoutAndTailMatchesScalarRows) {
  std::vector<const DotKernels*> tables = {&bestKernels()};
  for (const DotKernels* k :
       {&scalarKernels(), avx2Kernels(), avx2VnniKernels(), avx512Kernels(), avx512AmxKernels()}) {
    if (k && k != &bestKernels()) tables.push_back(k);
  }
  for (const DotKernels* k : tables) {
    checkTable(*k);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace tpnode::model::kernels
