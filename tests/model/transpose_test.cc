// model/kernels/cpu/transpose.h: every element lands where the definition puts it, for blocks
// with and without whole 8 x 8 tiles, strides wider than the block, and nothing outside the
// destination block is written.
#include <gtest/gtest.h>

#include <vector>

#include "model/kernels/cpu/transpose.h"

namespace tpnode::model::kernels {
namespace {

TEST(Transpose, EveryElementLandsAtItsTransposedPlaceAndNothingElseIsWritten) {
  for (int64_t rows : {1, 7, 8, 9, 16, 23}) {
    for (int64_t cols : {1, 5, 8, 16, 20, 128}) {
      const int64_t src_stride = cols + 3, dst_stride = rows + 5;
      std::vector<float> src(static_cast<size_t>(rows * src_stride));
      for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) + 0.5f;
      std::vector<float> dst(static_cast<size_t>(cols * dst_stride), -1.f);
      transposeFloats(src.data(), src_stride, rows, cols, dst.data(), dst_stride);
      for (int64_t c = 0; c < cols; ++c) {
        for (int64_t r = 0; r < dst_stride; ++r) {
          const float want = r < rows ? src[static_cast<size_t>(r * src_stride + c)] : -1.f;
          ASSERT_EQ(dst[static_cast<size_t>(c * dst_stride + r)], want)
              << rows << " x " << cols << " at row " << r << ", column " << c;
        }
      }
    }
  }
}

}  // namespace
}  // namespace tpnode::model::kernels
