// model/kernels/cpu/ops.h: rmsNormRows (the kernel table's path) and rmsNormRowsBaseline give
// rmsNorm's bits row by row (whole groups of 8 rows and the rest, widths with and without a tail
// past a multiple of 8, in place and not, with and without a weight); ropeRotate gives
// ropeRotateBaseline's.
#include "model/kernels/cpu/ops.h"

#include <gtest/gtest.h>

#include <bit>
#include <random>
#include <vector>

namespace tpnode::model::kernels {
namespace {

TEST(OpsTest, RmsNormRowsMatchesRmsNormPerRow) {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.f, 2.f);
  for (int64_t n : {1, 5, 8, 13, 40, 256, 640, 1031}) {
    for (int64_t rows : {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 15, 16, 17, 24, 33}) {
      std::vector<float> x(static_cast<size_t>(n * rows)), w(static_cast<size_t>(n));
      for (float& v : x) v = d(rng);
      for (float& v : w) v = 1.f + 0.1f * d(rng);
      for (const float* wp :
           {static_cast<const float*>(nullptr), static_cast<const float*>(w.data())}) {
        std::vector<float> want(x.size()), got(x.size()), base(x.size()), in_place = x;
        for (int64_t r = 0; r < rows; ++r) {
          rmsNorm(x.data() + r * n, wp, want.data() + r * n, n, 1e-6f);
        }
        rmsNormRows(x.data(), wp, got.data(), n, rows, 1e-6f);
        rmsNormRows(in_place.data(), wp, in_place.data(), n, rows, 1e-6f);
        rmsNormRowsBaseline(x.data(), wp, base.data(), n, rows, 1e-6f);
        for (size_t i = 0; i < x.size(); ++i) {
          ASSERT_EQ(std::bit_cast<uint32_t>(want[i]), std::bit_cast<uint32_t>(got[i]))
              << "n " << n << " rows " << rows << " i " << i;
          ASSERT_EQ(std::bit_cast<uint32_t>(want[i]), std::bit_cast<uint32_t>(in_place[i]))
              << "in place, n " << n << " rows " << rows << " i " << i;
          ASSERT_EQ(std::bit_cast<uint32_t>(want[i]), std::bit_cast<uint32_t>(base[i]))
              << "baseline, n " << n << " rows " << rows << " i " << i;
        }
      }
    }
  }
}

// ropeRotate (the AVX-512 kernel table's path where the CPU has it) gives ropeRotateBaseline's
// bits: both styles, rotations of whole vectors and with a tail (n_rot not a multiple of 16 or
// 32), values past n_rot untouched, zeros of both signs (the negation must keep -0).
TEST(OpsTest, RopeRotateMatchesTheBaseline) {
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.f, 3.f);
  for (RopeStyle style : {RopeStyle::kNormal, RopeStyle::kNeox}) {
    for (int64_t n_rot : {2, 6, 16, 18, 30, 32, 34, 64, 96, 128, 200, 256}) {
      const int64_t hd = n_rot + 8;
      std::vector<float> v(static_cast<size_t>(hd)), cs(static_cast<size_t>(n_rot));
      for (float& x : v) x = d(rng);
      for (float& x : cs) x = d(rng);
      v[0] = -0.f;
      v[1] = 0.f;
      cs[2] = 0.f;
      std::vector<float> want = v, got = v;
      ropeRotateBaseline(want.data(), n_rot, style, cs.data());
      ropeRotate(got.data(), n_rot, style, cs.data());
      for (size_t i = 0; i < v.size(); ++i) {
        ASSERT_EQ(std::bit_cast<uint32_t>(want[i]), std::bit_cast<uint32_t>(got[i]))
            << "style " << static_cast<int>(style) << " n_rot " << n_rot << " i " << i;
      }
      for (size_t i = static_cast<size_t>(n_rot); i < v.size(); ++i) EXPECT_EQ(got[i], v[i]);
    }
  }
}

}  // namespace
}  // namespace tpnode::model::kernels
