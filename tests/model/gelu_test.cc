// model/kernels/cpu/gelu.h: each SIMD GeGLU (AVX2, AVX-512) gives the scalar loop's bits (the f16
// table looked up with the same rounding, the same cut-offs at -10 and 10), on every length's tail.
#include "model/kernels/cpu/gelu.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

namespace tpnode::model::kernels {
namespace {

void expectScalarBits(GegluFn simd) {
  // Gates: random at several scales, the cut-offs and their neighbours, f16 rounding ties
  // (halfway between two halves), zeros, tiny values (f16 subnormals), large values.
  std::vector<float> g;
  std::mt19937 rng(7);
  for (float scale : {0.01f, 0.5f, 3.f, 20.f}) {
    std::normal_distribution<float> d(0.f, scale);
    for (int i = 0; i < 2000; ++i) g.push_back(d(rng));
  }
  for (float c : {-10.f, 10.f}) {
    g.push_back(c);
    g.push_back(std::nextafter(c, 0.f));
    g.push_back(std::nextafter(c, 2 * c));
  }
  for (float v = -12.f; v <= 12.f; v += 0.0009765625f * 1.5f) g.push_back(v);  // between halves
  for (float v : {0.f, -0.f, 1e-7f, -3e-6f, 6e-5f, 65504.f, -1e30f, 1e30f}) g.push_back(v);
  std::normal_distribution<float> du(0.f, 1.f);
  std::vector<float> u(g.size());
  for (float& x : u) x = du(rng);
  for (size_t n : {g.size(), g.size() - 1, g.size() - 7, size_t{5}, size_t{0}}) {
    std::vector<float> want(g.begin(), g.begin() + static_cast<ptrdiff_t>(n)), got = want;
    gegluScalar(want.data(), u.data(), static_cast<int64_t>(n));
    simd(got.data(), u.data(), static_cast<int64_t>(n));
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(want[i]), std::bit_cast<uint32_t>(got[i]))
          << "n " << n << " i " << i << " gate " << g[i];
    }
  }
}

TEST(GeluTest, Avx2GegluMatchesScalarBits) {
  const GegluFn simd = gegluAvx2();
  if (!simd) GTEST_SKIP() << "no AVX2 + F16C";
  expectScalarBits(simd);
}

TEST(GeluTest, Avx512GegluMatchesScalarBits) {
  const GegluFn simd = gegluAvx512();
  if (!simd) GTEST_SKIP() << "no AVX-512 F/BW/VL/VNNI";
  expectScalarBits(simd);
}

}  // namespace
}  // namespace tpnode::model::kernels
