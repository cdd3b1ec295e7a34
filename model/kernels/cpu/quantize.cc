#include "model/kernels/cpu/quantize.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"

namespace tpnode::model::kernels {
namespace {

// ggml's nearest_int: round half to even via the 1.5 * 2^23 trick (|x| < 2^22).
inline int nearestInt(float x) {
  float v = x + 12582912.f;
  int32_t i;
  std::memcpy(&i, &v, 4);
  return (i & 0x007fffff) - 0x00400000;
}

}  // namespace

void quantizeRowQ8_0(const float* x, BlockQ8_0* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK8_0; ++b, x += kQK8_0) {
    float amax = 0;
    for (int j = 0; j < kQK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
    y[b].d = f32ToFp16(amax / 127.f);
    const float id = amax != 0.f ? 127.f / amax : 0.f;
    for (int j = 0; j < kQK8_0; ++j) y[b].qs[j] = static_cast<int8_t>(std::nearbyint(x[j] * id));
  }
}

void quantizeRowQ8K(const float* x, BlockQ8K* y, int64_t n) {
  for (int64_t b = 0; b < n / kQKK; ++b, x += kQKK) {
    float max = 0, amax = 0;
    for (int j = 0; j < kQKK; ++j) {
      float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    BlockQ8K& o = y[b];
    if (amax == 0) {
      o.d = 0;
      std::memset(o.qs, 0, sizeof(o.qs));
      std::memset(o.bsums, 0, sizeof(o.bsums));
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < kQKK; ++j)
      o.qs[j] = static_cast<int8_t>(std::min(127, nearestInt(iscale * x[j])));
    for (int j = 0; j < kQKK / 16; ++j) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += o.qs[j * 16 + i];
      o.bsums[j] = static_cast<int16_t>(sum);
    }
    o.d = 1 / iscale;
  }
}

void quantizeRowQ4_0(const float* x, BlockQ4_0* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK4_0; ++b, x += kQK4_0) {
    float amax = 0, max = 0;
    for (int j = 0; j < kQK4_0; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    y[b].d = f32ToFp16(d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      int q0 = std::min(15, static_cast<int>(x[j] * id + 8.5f));
      int q1 = std::min(15, static_cast<int>(x[j + 16] * id + 8.5f));
      y[b].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void quantizeRowQ4K(const float* x, BlockQ4K* y, int64_t n) {
  for (int64_t b = 0; b < n / kQKK; ++b, x += kQKK) {
    float scale[8], minv[8];
    for (int s = 0; s < 8; ++s) {
      float lo = 0, hi = 0;  // min is clamped to <= 0 as in ggml
      for (int j = 0; j < 32; ++j) {
        lo = std::min(lo, x[s * 32 + j]);
        hi = std::max(hi, x[s * 32 + j]);
      }
      scale[s] = (hi - lo) / 15;
      minv[s] = -lo;
    }
    float max_scale = *std::max_element(scale, scale + 8);
    float max_min = *std::max_element(minv, minv + 8);
    float d = max_scale / 63, dmin = max_min / 63;
    BlockQ4K& o = y[b];
    o.d = f32ToFp16(d);
    o.dmin = f32ToFp16(dmin);
    d = fp16ToF32(o.d);
    dmin = fp16ToF32(o.dmin);
    uint8_t ls[8], lm[8];
    for (int s = 0; s < 8; ++s) {
      ls[s] = static_cast<uint8_t>(d > 0 ? std::min(63, nearestInt(scale[s] / d)) : 0);
      lm[s] = static_cast<uint8_t>(dmin > 0 ? std::min(63, nearestInt(minv[s] / dmin)) : 0);
    }
    for (int j = 0; j < 8; ++j) {  // inverse of q4kScaleMin
      if (j < 4) {
        o.scales[j] = ls[j];
        o.scales[j + 4] = lm[j];
      } else {
        o.scales[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
        o.scales[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
        o.scales[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
      }
    }
    uint8_t q[kQKK];
    for (int s = 0; s < 8; ++s) {
      float sd = d * ls[s], sm = dmin * lm[s];
      for (int j = 0; j < 32; ++j) {
        int v = sd > 0 ? nearestInt((x[s * 32 + j] + sm) / sd) : 0;
        q[s * 32 + j] = static_cast<uint8_t>(std::clamp(v, 0, 15));
      }
    }
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        o.qs[c * 32 + l] = static_cast<uint8_t>(q[c * 64 + l] | (q[c * 64 + 32 + l] << 4));
      }
    }
  }
}

void quantizeRowQ6K(const float* x, BlockQ6K* y, int64_t n) {
  for (int64_t b = 0; b < n / kQKK; ++b, x += kQKK) {
    float scale[16];
    float max_abs_scale = 0, max_scale = 0;
    for (int s = 0; s < 16; ++s) {
      float amax = 0, max = 0;
      for (int j = 0; j < 16; ++j) {
        if (std::fabs(x[s * 16 + j]) > amax) {
          amax = std::fabs(x[s * 16 + j]);
          max = x[s * 16 + j];
        }
      }
      scale[s] = max / -32;
      if (std::fabs(scale[s]) > max_abs_scale) {
        max_abs_scale = std::fabs(scale[s]);
        max_scale = scale[s];
      }
    }
    BlockQ6K& o = y[b];
    std::memset(&o, 0, sizeof(o));
    float iscale = max_scale != 0 ? -128.f / max_scale : 0;
    o.d = f32ToFp16(iscale != 0 ? 1 / iscale : 0);
    float d = fp16ToF32(o.d);
    uint8_t q[kQKK];
    for (int s = 0; s < 16; ++s) {
      o.scales[s] = static_cast<int8_t>(std::min(127, nearestInt(iscale * scale[s])));
      float sd = d * o.scales[s];
      for (int j = 0; j < 16; ++j) {
        int v = sd != 0 ? nearestInt(x[s * 16 + j] / sd) : 0;
        q[s * 16 + j] = static_cast<uint8_t>(std::clamp(v, -32, 31) + 32);
      }
    }
    for (int h = 0; h < 2; ++h) {  // inverse of the dequantization layout
      const uint8_t* qq = q + h * 128;
      uint8_t* ql = o.ql + h * 64;
      uint8_t* qh = o.qh + h * 32;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((qq[l] & 0xF) | ((qq[l + 64] & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((qq[l + 32] & 0xF) | ((qq[l + 96] & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((qq[l] >> 4) | ((qq[l + 32] >> 4) << 2) |
                                     ((qq[l + 64] >> 4) << 4) | ((qq[l + 96] >> 4) << 6));
      }
    }
  }
}

void quantizeRow(TensorType type, const float* x, void* dst, int64_t n) {
  switch (type) {
    case TensorType::kF32:
      std::memcpy(dst, x, static_cast<size_t>(n) * 4);
      return;
    case TensorType::kF16: {
      auto* o = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) o[i] = f32ToFp16(x[i]);
      return;
    }
    case TensorType::kBF16: {
      auto* o = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) o[i] = f32ToBf16(x[i]);
      return;
    }
    case TensorType::kQ8_0:
      return quantizeRowQ8_0(x, static_cast<BlockQ8_0*>(dst), n);
    case TensorType::kQ4_0:
      return quantizeRowQ4_0(x, static_cast<BlockQ4_0*>(dst), n);
    case TensorType::kQ4_K:
      return quantizeRowQ4K(x, static_cast<BlockQ4K*>(dst), n);
    case TensorType::kQ6_K:
      return quantizeRowQ6K(x, static_cast<BlockQ6K*>(dst), n);
    case TensorType::kQ8_K:
      return quantizeRowQ8K(x, static_cast<BlockQ8K*>(dst), n);
    case TensorType::kQ5_0:
      return quantizeRowQ5_0(x, static_cast<BlockQ5_0*>(dst), n);
    case TensorType::kQ5_1:
      return quantizeRowQ5_1(x, static_cast<BlockQ5_1*>(dst), n);
    case TensorType::kQ8_1:
      return quantizeRowQ8_1(x, static_cast<BlockQ8_1*>(dst), n);
    default:
      TP_CHECK(false, "quantizeRow: unsupported type {}", tensorTypeName(type));
  }
}

void dequantizeRow(TensorType type, const void* src, float* y, int64_t n) {
  switch (type) {
    case TensorType::kF32:
      std::memcpy(y, src, static_cast<size_t>(n) * 4);
      return;
    case TensorType::kF16:
      for (int64_t i = 0; i < n; ++i) y[i] = fp16ToF32(static_cast<const uint16_t*>(src)[i]);
      return;
    case TensorType::kBF16:
      for (int64_t i = 0; i < n; ++i) y[i] = bf16ToF32(static_cast<const uint16_t*>(src)[i]);
      return;
    case TensorType::kQ8_0: {
      auto* b = static_cast<const BlockQ8_0*>(src);
      for (int64_t i = 0; i < n; ++i) y[i] = fp16ToF32(b[i / 32].d) * b[i / 32].qs[i % 32];
      return;
    }
    case TensorType::kQ4_0: {
      auto* b = static_cast<const BlockQ4_0*>(src);
      for (int64_t k = 0; k < n / 32; ++k, y += 32) {
        const float d = fp16ToF32(b[k].d);
        for (int j = 0; j < 16; ++j) {
          y[j] = d * ((b[k].qs[j] & 0xF) - 8);
          y[j + 16] = d * ((b[k].qs[j] >> 4) - 8);
        }
      }
      return;
    }
    case TensorType::kQ4_K: {
      auto* b = static_cast<const BlockQ4K*>(src);
      for (int64_t k = 0; k < n / kQKK; ++k) {
        const float d = fp16ToF32(b[k].d), dmin = fp16ToF32(b[k].dmin);
        const uint8_t* q = b[k].qs;
        for (int j = 0; j < 4; ++j, q += 32) {
          uint8_t s0, m0, s1, m1;
          q4kScaleMin(2 * j, b[k].scales, s0, m0);
          q4kScaleMin(2 * j + 1, b[k].scales, s1, m1);
          const float d1 = d * s0, mm1 = dmin * m0, d2 = d * s1, mm2 = dmin * m1;
          for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - mm1;
          for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - mm2;
        }
      }
      return;
    }
    case TensorType::kQ6_K: {
      auto* b = static_cast<const BlockQ6K*>(src);
      for (int64_t k = 0; k < n / kQKK; ++k) {
        const float d = fp16ToF32(b[k].d);
        const uint8_t* ql = b[k].ql;
        const uint8_t* qh = b[k].qh;
        const int8_t* sc = b[k].scales;
        for (int h = 0; h < 2; ++h, y += 128, ql += 64, qh += 32, sc += 8) {
          for (int l = 0; l < 32; ++l) {
            int is = l / 16;
            int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
            int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l] = d * sc[is] * q1;
            y[l + 32] = d * sc[is + 2] * q2;
            y[l + 64] = d * sc[is + 4] * q3;
            y[l + 96] = d * sc[is + 6] * q4;
          }
        }
      }
      return;
    }
    case TensorType::kQ8_K: {
      auto* b = static_cast<const BlockQ8K*>(src);
      for (int64_t i = 0; i < n; ++i) y[i] = b[i / kQKK].d * b[i / kQKK].qs[i % kQKK];
      return;
    }
    case TensorType::kQ5_0:
    case TensorType::kQ5_1:
      return dequantizeRowQ5(type, src, y, n);
    case TensorType::kQ8_1:
      return dequantizeRowQ8_1(static_cast<const BlockQ8_1*>(src), y, n);
    default:
      TP_CHECK(false, "dequantizeRow: unsupported type {}", tensorTypeName(type));
  }
}

}  // namespace tpnode::model::kernels
