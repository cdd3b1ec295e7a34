// model/kernels/cpu/ops.h: rmsNormRows (the kernel table's path) and rmsNormRowsBaseline give
// rmsNorm's bits row by row (any number of rows, widths with and without a tail past a multiple
// of 8 or 16, in place and not, with and without a weight, rows whose squares span many orders
// of magnitude, a row whose mean is a float rounding tie); rmsMeanFromAnyOrderSum returns a mean
// only where it is rmsNorm's, also for sums at and beside rounding boundaries; ropeRotate gives
// ropeRotateBaseline's.
#include "model/kernels/cpu/ops.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <vector>

namespace tpnode::model::kernels {
namespace {

TEST(OpsTest, RmsNormRowsMatchesRmsNormPerRow) {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.f, 2.f);
  for (int64_t n : {1, 5, 8, 13, 16, 17, 31, 32, 33, 40, 256, 640, 1031}) {
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

// The mean rmsNorm computes: its squares added one by one in column order, over n, as a float.
float columnOrderMean(const float* x, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  return static_cast<float>(sum / static_cast<double>(n));
}

// Rows whose squares span ~14 orders of magnitude, where the order of the double additions shows
// in the sums' last bits (checked below: the test would not notice an order-dependent mean
// otherwise), and a row [1, 1, 1, 1 - 2^-24] whose squares sum to exactly 4 - 2^-23: a mean of
// 1 - 2^-25, the tie between 1 - 2^-24 and 1 that rounds to even (1), which no sum in another
// order may decide (rmsNormRows adds it again in column order).
TEST(OpsTest, RmsNormRowsMatchesRmsNormOnOrderSensitiveRows) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> exponent(-7.f, 7.f);
  std::bernoulli_distribution negative(0.5);
  for (int64_t n : {4, 37, 256, 640, 2048}) {
    const int64_t rows = 64;
    std::vector<float> x(static_cast<size_t>(n * rows));
    for (float& v : x) v = (negative(rng) ? -1.f : 1.f) * std::pow(10.f, exponent(rng));
    if (n == 4) {
      for (int i = 0; i < 3; ++i) x[static_cast<size_t>(i)] = 1.f;
      x[3] = 1.f - 0x1p-24f;
      EXPECT_EQ(columnOrderMean(x.data(), n), 1.f);
      EXPECT_FALSE(rmsMeanFromAnyOrderSum(4.0 - 0x1p-23, n).has_value());
    }
    int order_sensitive = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x.data() + r * n;
      double forward = 0, backward = 0;
      for (int64_t i = 0; i < n; ++i) forward += static_cast<double>(xr[i] * xr[i]);
      for (int64_t i = n - 1; i >= 0; --i) backward += static_cast<double>(xr[i] * xr[i]);
      order_sensitive += forward != backward;
    }
    if (n >= 256) {
      EXPECT_GT(order_sensitive, rows / 4) << "n " << n;
    }
    std::vector<float> want(x.size()), got(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      rmsNorm(x.data() + r * n, nullptr, want.data() + r * n, n, 1e-6f);
    }
    rmsNormRows(x.data(), nullptr, got.data(), n, rows, 1e-6f);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(want[i]), std::bit_cast<uint32_t>(got[i]))
          << "n " << n << " i " << i;
    }
  }
}

// rmsMeanFromAnyOrderSum against the column-order mean: for rows of random values and their
// squares added in other orders (backwards, in pairs), and for column-order sums placed on and
// beside float rounding ties with the other order's sum moved by up to (n - 1) x 2^-53 of it
// (the error bound of both orders): whatever it returns is the column-order mean, it declines
// the ties, and it decides nearly every ordinary row of 64 values or more. inf and NaN sums are
// declined.
TEST(OpsTest, RmsMeanFromAnyOrderSumIsRmsNormsMeanOrNothing) {
  std::mt19937 rng(13);
  std::normal_distribution<float> d(0.f, 3.f);
  int decided = 0, rows = 0;
  for (int64_t n : {1, 2, 7, 64, 256, 640, 2048, 5000}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int trial = 0; trial < 200; ++trial) {
      for (float& v : x) v = d(rng);
      const float want = columnOrderMean(x.data(), n);
      double backward = 0, even = 0, odd = 0;
      for (int64_t i = n - 1; i >= 0; --i) backward += static_cast<double>(x[i] * x[i]);
      for (int64_t i = 0; i < n; ++i) (i % 2 ? odd : even) += static_cast<double>(x[i] * x[i]);
      for (double sum : {backward, even + odd}) {
        if (const std::optional<float> got = rmsMeanFromAnyOrderSum(sum, n)) {
          ASSERT_EQ(std::bit_cast<uint32_t>(*got), std::bit_cast<uint32_t>(want)) << "n " << n;
        }
      }
      if (n >= 64) {  // a few squares sum exactly, often to a tie, which must be declined
        ++rows;
        decided += rmsMeanFromAnyOrderSum(backward, n).has_value();
      }
    }
  }
  EXPECT_GE(decided, rows * 99 / 100) << decided << " of " << rows;

  std::uniform_real_distribution<float> mag(0.01f, 100.f);
  std::uniform_int_distribution<int> step(-1, 1);
  for (int64_t n : {3, 640, 4096}) {
    const double bound = static_cast<double>(n - 1) * 0x1p-53;
    for (int trial = 0; trial < 2000; ++trial) {
      // A tie between two floats as the column-order mean, or a double a few ulps beside it.
      const float f = mag(rng);
      const double tie = (static_cast<double>(f) + std::nextafter(f, 1e9f)) / 2;
      double mean = tie;
      for (int k = trial % 4; k > 0; --k) mean = std::nextafter(mean, step(rng) > 0 ? 1e9 : 0.0);
      const double column_sum = mean * static_cast<double>(n);
      const float want = static_cast<float>(column_sum / static_cast<double>(n));
      for (double rel : {-bound, -bound / 3, 0.0, bound / 2, bound}) {
        const double other = column_sum * (1 + rel);
        if (const std::optional<float> got = rmsMeanFromAnyOrderSum(other, n)) {
          ASSERT_EQ(std::bit_cast<uint32_t>(*got), std::bit_cast<uint32_t>(want))
              << "n " << n << " mean " << mean << " rel " << rel;
        }
      }
      if (mean == tie) {
        EXPECT_FALSE(rmsMeanFromAnyOrderSum(column_sum, n).has_value()) << "n " << n;
      }
    }
  }
  EXPECT_FALSE(rmsMeanFromAnyOrderSum(std::numeric_limits<double>::infinity(), 8).has_value());
  EXPECT_FALSE(rmsMeanFromAnyOrderSum(std::numeric_limits<double>::quiet_NaN(), 8).has_value());
  EXPECT_EQ(rmsMeanFromAnyOrderSum(0.0, 8), 0.f);
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
