// Per-block dequantisation of ggml's weight blocks, shared by the CUDA kernels (nvcc) and the
// host test that checks it against kernels::dequantizeRow (g++). Pure functions on raw block
// bytes (ggml's exact layouts, model/kernels/cpu/blocks.h): no alignment is assumed, multi-byte
// fields are assembled from single bytes (little-endian), so a block may start at any address.
//
// dequant8<Type>(block, j, out): out[0..8) = values j..j+7 of the block, j % 8 == 0 and
// j + 8 <= the type's block size. The float operations are the CPU decoder's, in the same
// order, so on the host the results are bit-identical to kernels::dequantizeRow.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#define TPNODE_HD __host__ __device__ __forceinline__
#else
#define TPNODE_HD inline
#endif
#if defined(__CUDA_ARCH__)  // the device pass only: the host compiler warns on the pragma
#define TPNODE_UNROLL _Pragma("unroll")
#else
#define TPNODE_UNROLL
#endif

namespace tpnode::model::cuda::dq {

TPNODE_HD uint16_t load16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
TPNODE_HD uint32_t load32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

TPNODE_HD float bitsToFloat(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
#endif
}
TPNODE_HD uint32_t floatToBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

// IEEE half -> float (exact).
TPNODE_HD float f16ToF32(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0) {
    if (mant == 0) return bitsToFloat(sign);
    int e = -1;  // subnormal: normalise
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400) == 0);
    return bitsToFloat(sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ff) << 13));
  }
  if (exp == 31) return bitsToFloat(sign | 0x7f800000u | (mant << 13));
  return bitsToFloat(sign | ((exp + 127 - 15) << 23) | (mant << 13));
#endif
}

// float -> half, round to nearest even (as kernels::f32ToFp16).
TPNODE_HD uint16_t f32ToF16(float f) {
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(f));
#else
  const uint32_t x = floatToBits(f);
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t absx = x & 0x7fffffff;
  if (absx >= 0x7f800000)
    return static_cast<uint16_t>(sign | 0x7c00 | (absx > 0x7f800000 ? 0x200 : 0));
  if (absx >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);
  if (absx < 0x38800000) {
    if (absx < 0x33000000) return static_cast<uint16_t>(sign);
    const uint32_t e = absx >> 23;
    const uint32_t m = (absx & 0x7fffff) | 0x800000;
    const uint32_t shift = 126 - e;
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  const uint32_t r = absx - 0x38000000;
  uint32_t mant = r >> 13;
  const uint32_t rem = r & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (mant & 1))) ++mant;
  return static_cast<uint16_t>(sign | mant);
#endif
}

TPNODE_HD float bf16ToF32(uint16_t h) {
  return bitsToFloat(static_cast<uint32_t>(h) << 16);
}

// ---- Block decoders. Each takes the block's first byte and j (multiple of 8). ----------------

// Q8_0 (34 bytes): f16 d | i8 qs[32].
TPNODE_HD void dequant8Q8_0(const uint8_t* b, int j, float* out) {
  const float d = f16ToF32(load16(b));
  for (int i = 0; i < 8; ++i) out[i] = d * static_cast<float>(static_cast<int8_t>(b[2 + j + i]));
}

// Q4_0 (18 bytes): f16 d | u8 qs[16]; value j < 16 is the low nibble of qs[j], j >= 16 the high
// nibble of qs[j - 16].
TPNODE_HD void dequant8Q4_0(const uint8_t* b, int j, float* out) {
  const float d = f16ToF32(load16(b));
  const int shift = j < 16 ? 0 : 4;
  const uint8_t* qs = b + 2 + (j & 15);
  for (int i = 0; i < 8; ++i) out[i] = d * static_cast<float>(((qs[i] >> shift) & 0xF) - 8);
}

// Q5_0 (22 bytes): f16 d | u8 qh[4] | u8 qs[16]; bit 4 of value j is bit j of qh.
TPNODE_HD void dequant8Q5_0(const uint8_t* b, int j, float* out) {
  const float d = f16ToF32(load16(b));
  const uint32_t qh = load32(b + 2);
  const int shift = j < 16 ? 0 : 4;
  const uint8_t* qs = b + 6 + (j & 15);
  for (int i = 0; i < 8; ++i) {
    const int q = ((qs[i] >> shift) & 0xF) | static_cast<int>(((qh >> (j + i)) & 1) << 4);
    out[i] = d * static_cast<float>(q - 16);
  }
}

// Q5_1 (24 bytes): f16 d | f16 m | u8 qh[4] | u8 qs[16]; x = d * q + m.
TPNODE_HD void dequant8Q5_1(const uint8_t* b, int j, float* out) {
  const float d = f16ToF32(load16(b)), m = f16ToF32(load16(b + 2));
  const uint32_t qh = load32(b + 4);
  const int shift = j < 16 ? 0 : 4;
  const uint8_t* qs = b + 8 + (j & 15);
  for (int i = 0; i < 8; ++i) {
    const int q = ((qs[i] >> shift) & 0xF) | static_cast<int>(((qh >> (j + i)) & 1) << 4);
    out[i] = d * static_cast<float>(q) + m;
  }
}

// Q4_K's 6-bit scale and min of sub-block s (ggml get_scale_min_k4); sc = the 12 scale bytes.
TPNODE_HD void q4kScaleMin(int s, const uint8_t* sc, int& scale, int& min) {
  if (s < 4) {
    scale = sc[s] & 63;
    min = sc[s + 4] & 63;
  } else {
    scale = (sc[s + 4] & 0xF) | ((sc[s - 4] >> 6) << 4);
    min = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
  }
}

// Q4_K (144 bytes): f16 d | f16 dmin | u8 scales[12] | u8 qs[128]. Value j: group c = j / 64;
// within it, l = j % 64 < 32 is the low nibble of qs[c * 32 + l] (sub-block 2c), else the high
// nibble of qs[c * 32 + l - 32] (sub-block 2c + 1). x = d * scale * q - dmin * min.
TPNODE_HD void dequant8Q4_K(const uint8_t* b, int j, float* out) {
  const float d = f16ToF32(load16(b)), dmin = f16ToF32(load16(b + 2));
  const int c = j / 64, l = j % 64, hi = l >= 32 ? 1 : 0;
  int sc, mn;
  q4kScaleMin(2 * c + hi, b + 4, sc, mn);
  const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(mn);
  const uint8_t* qs = b + 16 + c * 32 + (l & 31);
  for (int i = 0; i < 8; ++i) out[i] = d1 * static_cast<float>((qs[i] >> (4 * hi)) & 0xF) - m1;
}

// Q6_K (210 bytes): u8 ql[128] | u8 qh[64] | i8 scales[16] | f16 d. Value j: half h = j / 128,
// quarter g = (j % 128) / 32, l = j % 32: low 4 bits from ql[h*64 + l + (g & 1) * 32] (nibble
// g >> 1), high 2 bits from qh[h*32 + l] >> 2g, scale scales[h*8 + l/16 + 2g]; x = d * sc * (q-32).
TPNODE_HD void dequant8Q6_K(const uint8_t* b, int j, float* out) {
  const float d = f16ToF32(load16(b + 208));
  const int h = j / 128, g = (j % 128) / 32, l = j % 32;
  const uint8_t* ql = b + h * 64 + l + (g & 1) * 32;
  const uint8_t* qh = b + 128 + h * 32 + l;
  const int sc = static_cast<int8_t>(b[192 + h * 8 + l / 16 + 2 * g]);
  const float ds = d * static_cast<float>(sc);
  const int lshift = (g >> 1) * 4, hshift = 2 * g;
  for (int i = 0; i < 8; ++i) {
    const int q = ((ql[i] >> lshift) & 0xF) | (((qh[i] >> hshift) & 3) << 4);
    out[i] = ds * static_cast<float>(q - 32);
  }
}

// ---- Wide-load decoders (the GEMV's): the caller loads aligned words, these decode them. ----

// byte i (0..3) of a little-endian word.
TPNODE_HD int byteOf(uint32_t w, int i) {
  return static_cast<int>((w >> (8 * i)) & 0xff);
}

// Split Q8_0 (q8_split.h): 16 quants in four little-endian words, all of one block of scale d.
TPNODE_HD void dequant16Q8(float d, uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3,
                           float* out) {
  const uint32_t w[4] = {w0, w1, w2, w3};
  TPNODE_UNROLL
  for (int i = 0; i < 16; ++i) {
    out[i] = d * static_cast<float>(static_cast<int8_t>(byteOf(w[i / 4], i % 4)));
  }
}

// Q4_K chunk k (0..15) of a block. h0..h3: the block's first 16 bytes as little-endian words
// (d | dmin, then scales[0..12)); q0, q1: the 8 qs bytes at 16 + (k / 4) * 32 + (k % 4) * 8.
// They hold values v + i (low nibbles, out lo[i]) and v + 32 + i (high nibbles, hi[i]) with
// v = (k / 4) * 64 + (k % 4) * 8, i < 8.
TPNODE_HD void dequant16Q4_K(uint32_t h0, uint32_t h1, uint32_t h2, uint32_t h3, uint32_t q0,
                             uint32_t q1, int k, float* lo, float* hi) {
  const float d = f16ToF32(static_cast<uint16_t>(h0 & 0xffff));
  const float dmin = f16ToF32(static_cast<uint16_t>(h0 >> 16));
  const int c = k / 4;  // sub-blocks 2c (low nibbles) and 2c + 1 (high)
  // scales[i] for i < 12: h1 holds 0..3, h2 4..7, h3 8..11.
  int sc0, m0, sc1, m1;
  if (c < 2) {  // sub-blocks 0..3: scales[s] & 63, mins scales[s + 4] & 63
    sc0 = byteOf(h1, 2 * c) & 63;
    m0 = byteOf(h2, 2 * c) & 63;
    sc1 = byteOf(h1, 2 * c + 1) & 63;
    m1 = byteOf(h2, 2 * c + 1) & 63;
  } else {  // sub-blocks 4..7: s = 2c + e, low bits in scales[s + 4], high in scales[s - 4], [s]
    const int e0 = 2 * c - 4, e1 = 2 * c - 3;  // s - 4, in 0..3
    sc0 = (byteOf(h3, e0) & 0xF) | ((byteOf(h1, e0) >> 6) << 4);
    m0 = (byteOf(h3, e0) >> 4) | ((byteOf(h2, e0) >> 6) << 4);
    sc1 = (byteOf(h3, e1) & 0xF) | ((byteOf(h1, e1) >> 6) << 4);
    m1 = (byteOf(h3, e1) >> 4) | ((byteOf(h2, e1) >> 6) << 4);
  }
  const float d0 = d * static_cast<float>(sc0), mm0 = dmin * static_cast<float>(m0);
  const float d1 = d * static_cast<float>(sc1), mm1 = dmin * static_cast<float>(m1);
  TPNODE_UNROLL
  for (int i = 0; i < 8; ++i) {
    const int b = byteOf(i < 4 ? q0 : q1, i % 4);
    lo[i] = d0 * static_cast<float>(b & 0xF) - mm0;
    hi[i] = d1 * static_cast<float>(b >> 4) - mm1;
  }
}

// Plain element types: 8 consecutive values starting at element j of a row.
TPNODE_HD void dequant8F16(const uint8_t* b, int j, float* out) {
  for (int i = 0; i < 8; ++i) out[i] = f16ToF32(load16(b + 2 * (j + i)));
}
TPNODE_HD void dequant8BF16(const uint8_t* b, int j, float* out) {
  for (int i = 0; i < 8; ++i) out[i] = bf16ToF32(load16(b + 2 * (j + i)));
}
TPNODE_HD void dequant8F32(const uint8_t* b, int j, float* out) {
  for (int i = 0; i < 8; ++i) out[i] = bitsToFloat(load32(b + 4 * (j + i)));
}

// Block geometry of the quantised types: values and bytes per block.
struct BlockGeom {
  int values, bytes;
};
inline constexpr BlockGeom kGeomQ8_0{32, 34}, kGeomQ4_0{32, 18}, kGeomQ5_0{32, 22},
    kGeomQ5_1{32, 24}, kGeomQ4_K{256, 144}, kGeomQ6_K{256, 210};

}  // namespace tpnode::model::cuda::dq
