// FastDiv: n / d and n % d for 0 <= n < 2^31 by a divisor known ahead (the KV block size), with
// a multiply-high, an add and a shift instead of an integer division (Granlund and
// Montgomery, "Division by invariant integers using multiplication", 1994): with
// s = ceil(log2 d) and mul = floor(2^32 (2^s - d) / d) + 1, n / d = (mulhi(n, mul) + n) >> s.
// Plain C++ for the host (tests/model/cuda/dequant_host_test.cc checks it), host and device
// under nvcc.
#pragma once

#include <cstdint>

namespace tpnode::model::cuda {

#if defined(__CUDACC__)
#define TPNODE_DIV_HD __host__ __device__ __forceinline__
#else
#define TPNODE_DIV_HD inline
#endif

struct FastDiv {
  uint32_t d = 1, mul = 1, shift = 0;

  // d >= 1 (d = 0 is taken as 1).
  static FastDiv of(uint32_t divisor) {
    FastDiv f;
    f.d = divisor == 0 ? 1 : divisor;
    while ((uint64_t{1} << f.shift) < f.d) ++f.shift;
    f.mul =
        static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << f.shift) - f.d)) / f.d + 1);
    return f;
  }

  // n < 2^31.
  TPNODE_DIV_HD uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t hi = __umulhi(n, mul);
#else
    const uint32_t hi = static_cast<uint32_t>((uint64_t{n} * mul) >> 32);
#endif
    return (hi + n) >> shift;
  }
  TPNODE_DIV_HD uint32_t mod(uint32_t n, uint32_t q) const {
    return n - q * d;
  }
};

#undef TPNODE_DIV_HD

}  // namespace tpnode::model::cuda
