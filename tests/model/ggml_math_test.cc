// model/kernels/cpu/ggml_math.h: llama.cpp's float orders, emulated. That the orders are
// llama.cpp's is checked end to end by reference_parity_test (bit-identical logits on Q4_0);
// here: the SIMD variants give the scalar variant's bits, exp is an exp, the sums follow the
// orders written out long-hand, and a softmax row behaves as llama.cpp's padded row.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "model/kernels/cpu/ggml_math.h"

namespace tpnode::model::kernels::ggml {
namespace {

std::vector<float> randomVector(size_t n, uint32_t seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

void expectSameBits(const std::vector<float>& a, const std::vector<float>& b,
                    const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(a[i]), std::bit_cast<uint32_t>(b[i]))
        << what << " at " << i << ": " << a[i] << " vs " << b[i];
  }
}

void expectScalarBits(const Impl& simd) {
  SCOPED_TRACE(simd.name);
  const Impl& ref = scalarImpl();
  const Impl* simd_impl = &simd;
  uint32_t seed = 1;
  for (int64_t hd : {32, 64, 80, 128, 200}) {
    for (int64_t n : {1, 17, 300}) {
      const int64_t row = hd + 8;  // rows a little apart, as several kv heads are
      const auto k = randomVector(static_cast<size_t>(n * row), seed++);
      const auto q = randomVector(static_cast<size_t>(hd), seed++);
      std::vector<float> a(static_cast<size_t>(n)), b(a.size());
      ref.scores(hd, q.data(), k.data(), row * sizeof(float), n, 0.125f, a.data());
      simd_impl->scores(hd, q.data(), k.data(), row * sizeof(float), n, 0.125f, b.data());
      expectSameBits(a, b, "scores hd " + std::to_string(hd) + " n " + std::to_string(n));
    }
  }
  // hd 64, 128, 256 with n 4, 19: whole 4-cell blocks and tails (16-float tables sum them 4 cells
  // at a time); n 3: a tail only.
  for (int64_t hd : {32, 64, 80, 128, 200, 256}) {
    for (int64_t heads : {1, 2, 3, 4, 5, 8}) {
      for (int64_t n : {3, 4, 19}) {
        const int64_t row = hd + 8;
        const auto k = randomVector(static_cast<size_t>(n * row), seed++);
        const auto q = randomVector(static_cast<size_t>(heads * hd), seed++);
        const int64_t out_stride = n + 3;
        std::vector<float> a(static_cast<size_t>(heads * out_stride), -1.f), b(a.size(), -1.f),
            one(a.size(), -1.f);
        ref.scoresHeads(hd, q.data(), heads, k.data(), row * sizeof(float), n, 0.125f, a.data(),
                        out_stride);
        simd_impl->scoresHeads(hd, q.data(), heads, k.data(), row * sizeof(float), n, 0.125f,
                               b.data(), out_stride);
        for (int64_t h = 0; h < heads; ++h) {  // = one scores() call per head
          ref.scores(hd, q.data() + h * hd, k.data(), row * sizeof(float), n, 0.125f,
                     one.data() + h * out_stride);
        }
        const std::string what =
            "scoresHeads hd " + std::to_string(hd) + " heads " + std::to_string(heads);
        expectSameBits(a, b, what + " n " + std::to_string(n));
        expectSameBits(a, one, what + " n " + std::to_string(n) + " vs scores");
      }
    }
  }
  for (VSumOrder order : {VSumOrder::kVecDot64, VSumOrder::kTinyBlas16}) {
    for (int64_t hd : {32, 64, 128, 200}) {
      for (int64_t heads : {1, 3, 4, 6}) {
        for (int64_t n : {1, 17, 200}) {
          const int64_t row = hd + 8, p_stride = n + 5;
          const auto v = randomVector(static_cast<size_t>(n * row), seed++);
          const auto p = randomVector(static_cast<size_t>(heads * p_stride), seed++);
          std::vector<float> lanes(kWeightedRowSumHeadsScratch), a(static_cast<size_t>(heads * hd)),
              b(a.size()), one(a.size());
          ref.weightedRowSumHeads(order, p.data(), p_stride, heads, v.data(), row * sizeof(float),
                                  n, hd, lanes.data(), a.data());
          simd_impl->weightedRowSumHeads(order, p.data(), p_stride, heads, v.data(),
                                         row * sizeof(float), n, hd, lanes.data(), b.data());
          for (int64_t h = 0; h < heads; ++h) {  // = one weightedRowSum per head
            simd_impl->weightedRowSum(order, p.data() + h * p_stride, v.data(), row * sizeof(float),
                                      n, hd, lanes.data(), one.data() + h * hd);
          }
          const std::string what = "weightedRowSumHeads hd " + std::to_string(hd) + " heads " +
                                   std::to_string(heads) + " n " + std::to_string(n);
          expectSameBits(a, b, what);
          expectSameBits(a, one, what + " vs weightedRowSum");
        }
      }
    }
  }
  for (int64_t n : {1, 5, 16, 37, 300}) {
    auto x = randomVector(static_cast<size_t>(n), seed++, 30.f);  // some exp(x - max) underflow
    for (int64_t i = 0; i < std::min<int64_t>(n - 1, 3); ++i) x[static_cast<size_t>(i)] = -INFINITY;
    auto a = x, b = x;
    ref.softmax(a.data(), n);
    simd_impl->softmax(b.data(), n);
    expectSameBits(a, b, "softmax n " + std::to_string(n));
  }
  {  // the max a zero of both signs (the vector max may keep the other one than the scalar loop)
    std::vector<float> x(20, -1.5f);
    x[3] = -0.f;
    x[17] = 0.f;
    x[5] = -INFINITY;
    auto a = x, b = x;
    ref.softmax(a.data(), 20);
    simd_impl->softmax(b.data(), 20);
    expectSameBits(a, b, "softmax with max -0 and +0");
  }
  for (int64_t n : {7, 16, 768, 770}) {
    const auto g = randomVector(static_cast<size_t>(n), seed++, 40.f);  // exp(-g) overflows too
    const auto u = randomVector(static_cast<size_t>(n), seed++);
    auto a = g, b = g;
    ref.swiglu(a.data(), u.data(), n);
    simd_impl->swiglu(b.data(), u.data(), n);
    expectSameBits(a, b, "swiglu n " + std::to_string(n));
  }
  // exp's scaling by 2^n through every range, whole vectors of lanes in each: |n| <= 126, the
  // subnormal and overflowing 126 < |n| <= 192, and |n| > 192 (0 / inf). A softmax row whose
  // maximum is 0 takes exp of the values themselves, swiglu exp(-g); consecutive values are close,
  // so each vector of lanes stays in one range (and some straddle two).
  for (float hi : {-60.f, -85.f, -120.f}) {
    std::vector<float> x(1201);
    x[0] = 0.f;
    for (size_t i = 1; i < x.size(); ++i) x[i] = hi - 0.06f * static_cast<float>(i);
    auto a = x, b = x;
    ref.softmax(a.data(), static_cast<int64_t>(x.size()));
    simd_impl->softmax(b.data(), static_cast<int64_t>(x.size()));
    expectSameBits(a, b, "softmax sweep from " + std::to_string(hi));
  }
  for (float sign : {1.f, -1.f}) {
    std::vector<float> g(1200), u(g.size(), 1.5f);
    for (size_t i = 0; i < g.size(); ++i) g[i] = sign * (60.f + 0.07f * static_cast<float>(i));
    auto a = g, b = g;
    ref.swiglu(a.data(), u.data(), static_cast<int64_t>(g.size()));
    simd_impl->swiglu(b.data(), u.data(), static_cast<int64_t>(g.size()));
    expectSameBits(a, b,
                   sign > 0 ? "swiglu sweep, exp(-g) underflowing" : "swiglu sweep, overflowing");
  }
  // Weights: 0 normal; 1 some subnormal (a peaked softmax's underflowing tail) and some 0; 2 all
  // subnormal (sums that stay subnormal); 3 as 1 with the subnormal-weight
  // rows 2^160 times the others (products that do not vanish in the sums).
  for (int kind = 0; kind < 4; ++kind) {
    for (VSumOrder order : {VSumOrder::kVecDot64, VSumOrder::kTinyBlas16}) {
      for (int64_t hd : {32, 36, 128, 200}) {
        for (int64_t n : {1, 3, 200}) {
          auto v = randomVector(static_cast<size_t>(n * hd), seed++);
          auto p = randomVector(static_cast<size_t>(n), seed++);
          for (size_t j = 0; j < p.size(); ++j) {
            if ((kind == 1 || kind == 3) && j % 3 == 0) p[j] = std::ldexp(p[j], -135);
            if ((kind == 1 || kind == 3) && j % 5 == 1) p[j] = 0.f;
            if (kind == 2) p[j] = std::ldexp(p[j], -140);
          }
          if (kind == 3) {  // subnormal-weight rows large, the others small
            for (size_t i = 0; i < v.size(); ++i) {
              v[i] = std::ldexp(v[i], (i / static_cast<size_t>(hd)) % 3 == 0 ? 100 : -60);
            }
          }
          std::vector<float> lanes(kWeightedRowSumScratch), a(static_cast<size_t>(hd)), b(a.size());
          ref.weightedRowSum(order, p.data(), v.data(), hd * sizeof(float), n, hd, lanes.data(),
                             a.data());
          simd_impl->weightedRowSum(order, p.data(), v.data(), hd * sizeof(float), n, hd,
                                    lanes.data(), b.data());
          expectSameBits(a, b,
                         "weightedRowSum kind " + std::to_string(kind) + " hd " +
                             std::to_string(hd) + " n " + std::to_string(n));
        }
      }
    }
  }
}

// weightedRowSumHeadsT over V transposed gives weightedRowSumHeads's bits in the tinyBLAS order:
// cells not a multiple of 16 (the zero-padded tail), fewer than 16, head dims not a multiple of 4,
// weights of exactly 0 (masked cells) against negative values, heads not a multiple of 4, and the
// transposed rows longer than n with other values past n (a query block's later cells), which must
// not be read.
void expectTransposedSumBits(const Impl& impl) {
  SCOPED_TRACE(impl.name);
  uint32_t seed = 500;
  for (int64_t hd : {30, 32, 64, 128, 200}) {  // 30: values past the last group of 4
    for (int64_t heads : {1, 2, 3, 4, 6}) {
      for (int64_t n : {1, 15, 16, 17, 200}) {
        const int64_t row = hd + 8, p_stride = n + 5, vt_stride = n + 19;
        const auto v = randomVector(static_cast<size_t>(n * row), seed++);
        auto p = randomVector(static_cast<size_t>(heads * p_stride), seed++);
        for (size_t i = 0; i < p.size(); i += 3) p[i] = 0.f;
        std::vector<float> vt(static_cast<size_t>(hd * vt_stride), NAN);
        for (int64_t j = 0; j < n; ++j) {
          for (int64_t d = 0; d < hd; ++d) {
            vt[static_cast<size_t>(d * vt_stride + j)] = v[static_cast<size_t>(j * row + d)];
          }
        }
        std::vector<float> lanes(kWeightedRowSumHeadsScratch), a(static_cast<size_t>(heads * hd)),
            b(a.size(), -1.f);
        scalarImpl().weightedRowSumHeads(VSumOrder::kTinyBlas16, p.data(), p_stride, heads,
                                         v.data(), row * sizeof(float), n, hd, lanes.data(),
                                         a.data());
        impl.weightedRowSumHeadsT(p.data(), p_stride, heads, vt.data(), vt_stride, n, hd, b.data());
        expectSameBits(a, b,
                       "weightedRowSumHeadsT hd " + std::to_string(hd) + " heads " +
                           std::to_string(heads) + " n " + std::to_string(n));
      }
    }
  }
}

TEST(GgmlMath, TransposedVSumGivesTheRowSumsBits) {
  expectTransposedSumBits(scalarImpl());
  if (avx2Impl() != nullptr) expectTransposedSumBits(*avx2Impl());
  if (avx512Impl() != nullptr) expectTransposedSumBits(*avx512Impl());
}

TEST(GgmlMath, Avx2VariantGivesTheScalarBits) {
  if (avx2Impl() == nullptr) GTEST_SKIP() << "this CPU has no AVX2 + FMA";
  expectScalarBits(*avx2Impl());
}

TEST(GgmlMath, Avx512VariantGivesTheScalarBits) {
  if (avx512Impl() == nullptr) GTEST_SKIP() << "this CPU has no AVX-512 F + DQ";
  expectScalarBits(*avx512Impl());
}

TEST(GgmlMath, ExpIsWithinThreeUlpAndSaturatesLikeGgml) {
  for (float x = -87.f; x <= 88.f; x += 0.01234f) {
    const double want = std::exp(static_cast<double>(x));
    const double ulp = std::ldexp(1.0, std::ilogb(static_cast<float>(want)) - 23);
    ASSERT_LE(std::fabs(expf(x) - want), 3 * ulp) << "x " << x;  // ggml: 1.45 ulp + rounding
  }
  EXPECT_EQ(expf(-INFINITY), 0.f);
  EXPECT_EQ(expf(-200.f), 0.f);
  EXPECT_EQ(expf(200.f), INFINITY);
  EXPECT_EQ(expf(0.f), 1.f);
}

// The order, written out long-hand: 64 fused lanes over whole blocks of 64, lanes folded as
// (l + l+32) + (l+16 + l+48), the 16 results reduced as _mm512_reduce_add_ps, then the rest in
// order (chunks of 16 and 8 as rounded products, the last < 8 fused).
float dotLongHand(int64_t n, const float* x, const float* y) {
  const int64_t np = n / 64 * 64;
  float sum = 0.f;
  if (np > 0) {
    float lane[64] = {};
    for (int64_t i = 0; i < np; ++i) lane[i % 64] = std::fma(x[i], y[i], lane[i % 64]);
    float f[16];
    for (int l = 0; l < 16; ++l) f[l] = (lane[l] + lane[l + 32]) + (lane[l + 16] + lane[l + 48]);
    float h[8];
    for (int l = 0; l < 8; ++l) h[l] = f[l] + f[l + 8];
    sum = ((h[0] + h[4]) + (h[2] + h[6])) + ((h[1] + h[5]) + (h[3] + h[7]));
  }
  const int64_t fused_from = np + (n - np) / 8 * 8;
  for (int64_t i = np; i < n; ++i) {
    if (i < fused_from) {
      const float p = x[i] * y[i];
      sum += p;
    } else {
      sum = std::fma(x[i], y[i], sum);
    }
  }
  return sum;
}

TEST(GgmlMath, DotSumsInLlamaCppLaneOrder) {
  uint32_t seed = 7;
  for (int64_t n : {5, 8, 13, 32, 40, 64, 80, 100, 128, 256, 333}) {
    int told_apart = 0;  // trials where plain summation, fused or not, gives other bits
    for (int trial = 0; trial < 20; ++trial) {
      const auto x = randomVector(static_cast<size_t>(n), seed++);
      const auto y = randomVector(static_cast<size_t>(n), seed++);
      const float want = dotLongHand(n, x.data(), y.data());
      const float got = dotF32(n, x.data(), y.data());
      ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
          << "n " << n << " trial " << trial;
      float scored = 0;
      scores(n, y.data(), x.data(), 0, 1, 0.5f, &scored);  // the attention entry point
      ASSERT_EQ(std::bit_cast<uint32_t>(scored), std::bit_cast<uint32_t>(got * 0.5f)) << "n " << n;
      float fused = 0, rounded = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        fused = std::fma(x[i], y[i], fused);
        const float p = x[i] * y[i];
        rounded += p;
      }
      told_apart += fused != want || rounded != want;
    }
    EXPECT_GT(told_apart, 0) << "n " << n << ": the data cannot tell summation orders apart";
  }
}

// llama.cpp's softmax row holds every cell, masked ones as -inf, padded to a multiple of 16:
// attention passes only the cells from a multiple of 16 up to the query's position, so the
// missing tail must count as zeros (not as libm exps, not as a shorter chunk).
TEST(GgmlMath, SoftmaxOfAShortRowEqualsThePaddedRow) {
  uint32_t seed = 11;
  for (int64_t n : {1, 3, 16, 21, 100}) {
    const auto x = randomVector(static_cast<size_t>(n), seed++, 4.f);
    auto padded = x;
    padded.resize(static_cast<size_t>((n + 15) / 16 * 16 + 32), -INFINITY);
    auto a = x;
    softmax(a.data(), n);
    softmax(padded.data(), static_cast<int64_t>(padded.size()));
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(std::bit_cast<uint32_t>(a[static_cast<size_t>(i)]),
                std::bit_cast<uint32_t>(padded[static_cast<size_t>(i)]))
          << "n " << n << " at " << i;
      total += a[static_cast<size_t>(i)];
    }
    for (size_t i = static_cast<size_t>(n); i < padded.size(); ++i) EXPECT_EQ(padded[i], 0.f);
    EXPECT_NEAR(total, 1.0, 1e-6);
  }
}

// The V sums written out long-hand: row j adds into lane j % lanes with fused multiply-adds; 64
// lanes fold as (l + l+32) + (l+16 + l+48), then the 16 as _mm512_reduce_add_ps.
float weightedRowSumLongHand(int lanes, const std::vector<float>& p, const std::vector<float>& v,
                             int64_t hd, int64_t d) {
  std::vector<float> lane(static_cast<size_t>(lanes), 0.f);
  for (size_t j = 0; j < p.size(); ++j) {
    float& acc = lane[j % static_cast<size_t>(lanes)];
    acc = std::fma(v[j * static_cast<size_t>(hd) + static_cast<size_t>(d)], p[j], acc);
  }
  float f[16];
  for (int l = 0; l < 16; ++l) {
    f[l] = lanes == 64 ? (lane[l] + lane[l + 32]) + (lane[l + 16] + lane[l + 48]) : lane[l];
  }
  float h[8];
  for (int l = 0; l < 8; ++l) h[l] = f[l] + f[l + 8];
  return ((h[0] + h[4]) + (h[2] + h[6])) + ((h[1] + h[5]) + (h[3] + h[7]));
}

TEST(GgmlMath, WeightedRowSumFollowsVecDotAndTinyBlasOrders) {
  const int64_t hd = 40;
  std::vector<float> lanes(kWeightedRowSumScratch);
  for (int64_t n : {1, 7, 64, 150, 600}) {
    const auto v = randomVector(static_cast<size_t>(n * hd), 21 + static_cast<uint32_t>(n));
    const auto p = randomVector(static_cast<size_t>(n), 22 + static_cast<uint32_t>(n));
    std::vector<float> vec_dot(static_cast<size_t>(hd)), tiny_blas(vec_dot.size());
    weightedRowSum(VSumOrder::kVecDot64, p.data(), v.data(), hd * sizeof(float), n, hd,
                   lanes.data(), vec_dot.data());
    weightedRowSum(VSumOrder::kTinyBlas16, p.data(), v.data(), hd * sizeof(float), n, hd,
                   lanes.data(), tiny_blas.data());
    int told_apart = 0;
    for (int64_t d = 0; d < hd; ++d) {
      const size_t i = static_cast<size_t>(d);
      ASSERT_EQ(std::bit_cast<uint32_t>(vec_dot[i]),
                std::bit_cast<uint32_t>(weightedRowSumLongHand(64, p, v, hd, d)))
          << "n " << n << " d " << d;
      ASSERT_EQ(std::bit_cast<uint32_t>(tiny_blas[i]),
                std::bit_cast<uint32_t>(weightedRowSumLongHand(16, p, v, hd, d)))
          << "n " << n << " d " << d;
      told_apart += vec_dot[i] != tiny_blas[i];
    }
    if (n >= 150) {
      EXPECT_GT(told_apart, 0) << "n " << n << ": the orders give the same bits";
    }
  }
}

}  // namespace
}  // namespace tpnode::model::kernels::ggml
