// Quantization block layouts, exactly as ggml defines them (ggml-common.h), and scalar
// half/bfloat16 conversions. Blocks are read from file bytes as-is (little-endian host).
//
//   Q8_0  32 values: f16 d | i8 qs[32]                          x = d * q
//   Q4_0  32 values: f16 d | u8 qs[16]  q[j] = qs[j] & 15 (j<16), qs[j-16] >> 4; x = d * (q - 8)
//   Q4_K 256 values: f16 d | f16 dmin | u8 scales[12] (8 x 6-bit scale and min) | u8 qs[128]
//                    x = d * scale_s * q - dmin * min_s, sub-blocks of 32
//   Q6_K 256 values: u8 ql[128] (low 4 bits) | u8 qh[64] (high 2 bits) | i8 scales[16] | f16 d
//                    x = d * scale_s * (q - 32), sub-blocks of 16
//   Q8_K 256 values: f32 d | i8 qs[256] | i16 bsums[16] (sums of 16) -- activations only
#pragma once

#include <cstdint>
#include <cstring>

namespace tpnode::model::kernels {

constexpr int kQK8_0 = 32;
constexpr int kQK4_0 = 32;
constexpr int kQKK = 256;

struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK8_0];
};
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK4_0 / 2];
};
struct BlockQ4K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[kQKK / 2];
};
struct BlockQ6K {
  uint8_t ql[kQKK / 2];
  uint8_t qh[kQKK / 4];
  int8_t scales[kQKK / 16];
  uint16_t d;
};
struct BlockQ8K {
  float d;
  int8_t qs[kQKK];
  int16_t bsums[kQKK / 16];
};
// Q5_0  32 values: f16 d | u8 qh[4] (bit 4 of value j = bit j) | u8 qs[16] (low nibbles as
//       Q4_0); x = d * (q - 16).   Q5_1: f16 d | f16 m | qh | qs; x = d * q + m.
// Q8_1  32 values: f16 d | f16 s (= d * sum of qs) | i8 qs[32] -- Q5_1's activations only
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[32];
};
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4K) == 144);
static_assert(sizeof(BlockQ6K) == 210);
static_assert(sizeof(BlockQ8K) == 292);

static inline float fp16ToF32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400) == 0);
      bits = sign | (uint32_t(127 - 15 - e) << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even, as F16C's _cvtss_sh(x, 0).
static inline uint16_t f32ToFp16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t absx = x & 0x7fffffff;
  if (absx >= 0x7f800000) return uint16_t(sign | 0x7c00 | (absx > 0x7f800000 ? 0x200 : 0));
  if (absx >= 0x477ff000) return uint16_t(sign | 0x7c00);  // rounds to infinity
  if (absx < 0x38800000) {                                 // subnormal or zero in half
    if (absx < 0x33000000) return uint16_t(sign);
    uint32_t e = absx >> 23;
    uint32_t m = (absx & 0x7fffff) | 0x800000;
    uint32_t shift = 126 - e;  // 14 + (113 - e) ... places the value in 10 bits
    uint32_t r = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) ++r;
    return uint16_t(sign | r);
  }
  uint32_t r = absx - 0x38000000;  // rebias exponent 127 -> 15
  uint32_t mant = r >> 13;
  uint32_t rem = r & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (mant & 1))) ++mant;
  return uint16_t(sign | mant);
}

static inline float bf16ToF32(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// As ggml's GGML_FP32_TO_BF16: round to nearest even, NaN stays quiet.
static inline uint16_t f32ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) return uint16_t((u >> 16) | 64);
  return uint16_t((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

// Q4_K's packed 6-bit scale and min of sub-block j (ggml get_scale_min_k4).
static inline void q4kScaleMin(int j, const uint8_t* q, uint8_t& d, uint8_t& m) {
  if (j < 4) {
    d = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    d = uint8_t((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    m = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

}  // namespace tpnode::model::kernels
