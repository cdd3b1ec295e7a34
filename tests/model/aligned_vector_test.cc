// AlignedVector: storage on a 64-byte boundary at every size and after every reallocation.
#include "model/kernels/cpu/aligned_vector.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace tpnode::model::kernels {
namespace {

bool onCacheLine(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 64 == 0;
}

TEST(AlignedVector, StorageStartsOnACacheLineAtEverySize) {
  // Small sizes come from malloc's heap, large ones from mmap: plain std::vector<float> starts
  // 16 bytes into a line in the latter.
  for (size_t n : {1, 3, 16, 17, 1000, 40000, 300000, 2000000}) {
    AlignedVector<float> v(n, 1.0f);
    EXPECT_TRUE(onCacheLine(v.data())) << n;
    EXPECT_EQ(v[n - 1], 1.0f);
  }
}

TEST(AlignedVector, GrowthReallocatesOnACacheLineAndKeepsTheValues) {
  AlignedVector<float> v;
  for (int i = 0; i < 100000; ++i) {
    v.push_back(static_cast<float>(i));
    if ((i & (i - 1)) == 0) {  // after each reallocation (capacity doubles)
      ASSERT_TRUE(onCacheLine(v.data())) << i;
    }
  }
  v.resize(700000);
  EXPECT_TRUE(onCacheLine(v.data()));
  for (int i = 0; i < 100000; i += 9999)
    EXPECT_EQ(v[static_cast<size_t>(i)], static_cast<float>(i));
}

}  // namespace
}  // namespace tpnode::model::kernels
