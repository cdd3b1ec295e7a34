// matmul() against the scalar kernels, for every weight type and every layout packWeights picks:
// row counts that fill whole 8-row tiles, that end in a partial tile (rows % 8 == 4) and that
// stay plain (rows % 4 != 0); token counts that fill the 4-token prefill tiles and that leave a
// tail of 1-3 tokens; row lengths of one to three blocks and of several, and for F16 / BF16 row
// lengths that end in part of a vector. (A row length that is not a multiple of the type's block
// cannot occur: GGUF refuses such a tensor at load.)
// Runs on every kernel table this CPU has (scalar, avx2, avx2vnni, avx512: each packs and runs its
// own layouts), and on the best one (which TPNODE_CPU_ISA may narrow).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "model/kernels/cpu/dot.h"
#include "model/kernels/cpu/matmul.h"
#include "model/kernels/cpu/q0_x16.h"
#include "model/kernels/cpu/quantize.h"
#include "tests/model/quant_rows.h"

namespace tpnode::model::kernels {
namespace {

using testing::encode;
using testing::randomRow;

struct Shape {
  int64_t rows, cols;
};

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
      std::vector<uint8_t> w;
      for (int64_t r = 0; r < s.rows; ++r) {
        auto enc = encode(type, randomRow(s.cols, static_cast<uint32_t>(500 + r), 0.1f));
        w.insert(w.end(), enc.begin(), enc.end());
      }
      const size_t row_bytes = rowBytes(type, static_cast<uint64_t>(s.cols));
      Matrix m;
      m.type = type;
      m.rows = s.rows;
      m.cols = s.cols;
      m.row_bytes = row_bytes;
      m.data = HostBuffer(w.size());
      std::memcpy(m.data.data(), w.data(), w.size());
      m = packWeights(std::move(m), WeightLayout::kAuto, k);
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
      for (int64_t n_tok : {1, 2, 4, 7}) {
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

TEST(MatmulTest, EveryTypeLayoutAndTailMatchesScalarRows) {
  std::vector<const DotKernels*> tables = {&bestKernels()};
  for (const DotKernels* k :
       {&scalarKernels(), avx2Kernels(), avx2VnniKernels(), avx512Kernels()}) {
    if (k && k != &bestKernels()) tables.push_back(k);
  }
  for (const DotKernels* k : tables) {
    checkTable(*k);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace tpnode::model::kernels
