#include "collectives/reduce.h"

#include <cstdint>
#include <cstring>

#include "collectives/half.h"
#include "common/check.h"

namespace tpnode::collectives {
namespace {

constexpr size_t kBlock = 512;  // elements per stack accumulator block (2 KiB)

struct F32 {
  using T = float;
  static float load(T v) { return v; }
  static T store(float v) { return v; }
};
struct F16 {
  using T = uint16_t;
  static float load(T v) { return f16ToF32(v); }
  static T store(float v) { return f32ToF16(v); }
};
struct BF16 {
  using T = uint16_t;
  static float load(T v) { return bf16ToF32(v); }
  static T store(float v) { return f32ToBf16(v); }
};

template <typename D>
void reduceSumT(void* dst, std::span<const void* const> srcs, size_t count) {
  using T = typename D::T;
  auto* out = static_cast<T*>(dst);
  float acc[kBlock];
  for (size_t base = 0; base < count; base += kBlock) {
    const size_t n = count - base < kBlock ? count - base : kBlock;
    const T* s0 = static_cast<const T*>(srcs[0]) + base;
    for (size_t i = 0; i < n; ++i) acc[i] = D::load(s0[i]);
    for (size_t k = 1; k < srcs.size(); ++k) {
      const T* s = static_cast<const T*>(srcs[k]) + base;
      for (size_t i = 0; i < n; ++i) acc[i] += D::load(s[i]);
    }
    for (size_t i = 0; i < n; ++i) out[base + i] = D::store(acc[i]);
  }
}

// f32 with the same grouping as reduceSumT<F32> (element i: ((s0 + s1) + s2) + ..., one rounding
// per addition), compiled once per vector width and picked at the first call from what the CPU
// has (a plain function pointer, not GCC's target_clones: their ifunc resolvers run before the
// sanitizer runtimes start and crash the TSan/ASan builds). The bits do not depend on the pick.
[[gnu::always_inline]] inline void reduceSumF32Body(float* out, const void* const* srcs,
                                                    size_t n_srcs, size_t count) {
  float acc[kBlock];
  for (size_t base = 0; base < count; base += kBlock) {
    const size_t n = count - base < kBlock ? count - base : kBlock;
    const float* s0 = static_cast<const float*>(srcs[0]) + base;
    for (size_t i = 0; i < n; ++i) acc[i] = s0[i];
    for (size_t k = 1; k < n_srcs; ++k) {
      const float* s = static_cast<const float*>(srcs[k]) + base;
      for (size_t i = 0; i < n; ++i) acc[i] += s[i];
    }
    for (size_t i = 0; i < n; ++i) out[base + i] = acc[i];
  }
}

using ReduceSumF32Fn = void (*)(float*, const void* const*, size_t, size_t);

void reduceSumF32Plain(float* out, const void* const* srcs, size_t n_srcs, size_t count) {
  reduceSumF32Body(out, srcs, n_srcs, count);
}
#if defined(__x86_64__)
[[gnu::target("avx2")]] void reduceSumF32Avx2(float* out, const void* const* srcs, size_t n_srcs,
                                              size_t count) {
  reduceSumF32Body(out, srcs, n_srcs, count);
}
[[gnu::target("avx512f")]] void reduceSumF32Avx512(float* out, const void* const* srcs,
                                                   size_t n_srcs, size_t count) {
  reduceSumF32Body(out, srcs, n_srcs, count);
}
#endif

ReduceSumF32Fn pickReduceSumF32() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return reduceSumF32Avx512;
  if (__builtin_cpu_supports("avx2")) return reduceSumF32Avx2;
#endif
  return reduceSumF32Plain;
}

void reduceSumF32(float* out, const void* const* srcs, size_t n_srcs, size_t count) {
  static const ReduceSumF32Fn fn = pickReduceSumF32();
  fn(out, srcs, n_srcs, count);
}

template <typename D>
void addIntoT(void* acc, const void* src, size_t count) {
  using T = typename D::T;
  auto* a = static_cast<T*>(acc);
  const auto* s = static_cast<const T*>(src);
  for (size_t i = 0; i < count; ++i) a[i] = D::store(D::load(a[i]) + D::load(s[i]));
}

}  // namespace

void reduceSum(void* dst, std::span<const void* const> srcs, size_t count, DType dtype) {
  TP_CHECK(!srcs.empty());
  if (srcs.size() == 1) {
    if (dst != srcs[0]) std::memmove(dst, srcs[0], count * dtypeSize(dtype));
    return;
  }
  switch (dtype) {
    case DType::kF32:
      return reduceSumF32(static_cast<float*>(dst), srcs.data(), srcs.size(), count);
    case DType::kF16:
      return reduceSumT<F16>(dst, srcs, count);
    case DType::kBF16:
      return reduceSumT<BF16>(dst, srcs, count);
  }
  TP_CHECK(false, "dtype {}", static_cast<int>(dtype));
}

void addInto(void* acc, const void* src, size_t count, DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return addIntoT<F32>(acc, src, count);
    case DType::kF16:
      return addIntoT<F16>(acc, src, count);
    case DType::kBF16:
      return addIntoT<BF16>(acc, src, count);
  }
  TP_CHECK(false, "dtype {}", static_cast<int>(dtype));
}

}  // namespace tpnode::collectives
