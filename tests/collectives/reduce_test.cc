#include "collectives/reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "collectives/half.h"
#include "collectives/slicing.h"

namespace tpnode::collectives {
namespace {

TEST(HalfTest, F16KnownValues) {
  EXPECT_EQ(f32ToF16(1.0f), 0x3C00);
  EXPECT_EQ(f32ToF16(-2.0f), 0xC000);
  EXPECT_EQ(f32ToF16(65504.0f), 0x7BFF);
  EXPECT_EQ(f32ToF16(1e6f), 0x7C00);                // overflow -> inf
  EXPECT_EQ(f32ToF16(5.9604645e-8f), 0x0001);       // smallest subnormal
  EXPECT_EQ(f32ToF16(1.0f + 1.0f / 2048), 0x3C00);  // tie -> even
  EXPECT_EQ(f32ToF16(1.0f + 3.0f / 2048), 0x3C02);  // tie -> even (up)
  EXPECT_TRUE(std::isnan(f16ToF32(f32ToF16(std::numeric_limits<float>::quiet_NaN()))));
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16ToF32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32ToF16(f), h) << h;  // every f16 round-trips
  }
}

TEST(HalfTest, Bf16KnownValues) {
  EXPECT_EQ(f32ToBf16(1.0f), 0x3F80);
  EXPECT_EQ(bf16ToF32(0xC000), -2.0f);
  EXPECT_EQ(f32ToBf16(std::bit_cast<float>(0x3F808000u)), 0x3F80);  // tie -> even
  EXPECT_EQ(f32ToBf16(std::bit_cast<float>(0x3F818000u)), 0x3F82);  // tie -> even (up)
  EXPECT_TRUE(std::isnan(bf16ToF32(f32ToBf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(ReduceTest, SumsInSourceOrderWithOneRounding) {
  // 1 + 2^-24 + 2^-24 differs by grouping in f32; the kernel groups left to right.
  const float a[] = {1.0f}, b[] = {0x1.0p-24f}, c[] = {0x1.0p-24f};
  float out = 0;
  const void* abc[] = {a, b, c};
  reduceSum(&out, abc, 1, DType::kF32);
  EXPECT_EQ(out, (1.0f + 0x1.0p-24f) + 0x1.0p-24f);
  const void* bca[] = {b, c, a};
  reduceSum(&out, bca, 1, DType::kF32);
  EXPECT_EQ(out, (0x1.0p-24f + 0x1.0p-24f) + 1.0f);
  EXPECT_NE((1.0f + 0x1.0p-24f) + 0x1.0p-24f, (0x1.0p-24f + 0x1.0p-24f) + 1.0f);
}

TEST(ReduceTest, F16AccumulatesInF32) {
  // 2048 + 1 + 1 in f16 step by step gives 2048 (ties to even); in f32 then rounded: 2050.
  const uint16_t x = f32ToF16(2048.0f), one = f32ToF16(1.0f);
  uint16_t out = 0;
  const void* srcs[] = {&x, &one, &one};
  reduceSum(&out, srcs, 1, DType::kF16);
  EXPECT_EQ(f16ToF32(out), 2050.0f);
  uint16_t acc = x;
  addInto(&acc, &one, 1, DType::kF16);
  addInto(&acc, &one, 1, DType::kF16);
  EXPECT_EQ(f16ToF32(acc), 2048.0f);  // the ring rounds after every hop
}

TEST(ReduceTest, InPlaceAndLongVectors) {
  std::vector<float> a(1500), b(1500);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>(i);
    b[i] = 0.5f;
  }
  const void* srcs[] = {a.data(), b.data()};
  reduceSum(a.data(), srcs, a.size(), DType::kF32);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], static_cast<float>(i) + 0.5f);
}

TEST(SlicingTest, CoversEveryElementOnce) {
  for (size_t count : {0, 1, 5, 16, 17, 100, 1023}) {
    for (int parts : {1, 2, 3, 4, 7}) {
      for (size_t align : {1, 16}) {
        size_t next = 0;
        for (int i = 0; i < parts; ++i) {
          const Range r = sliceRange(count, parts, i, align);
          ASSERT_EQ(r.begin, next);
          ASSERT_LE(r.end, count);
          if (r.size() > 0 && r.end < count) {
            ASSERT_EQ(r.size() % align, 0u);
          }
          next = r.end;
        }
        ASSERT_EQ(next, count);
      }
    }
  }
  EXPECT_EQ(sliceRange(10, 4, 0), (Range{0, 3}));
  EXPECT_EQ(sliceRange(10, 4, 3), (Range{9, 10}));
  EXPECT_EQ(sliceRange(10, 4, 1, 16), (Range{10, 10}));
}

}  // namespace
}  // namespace tpnode::collectives
