// Q5_0 / Q5_1 weight rows (round-to-nearest encoders as ggml's quantize_row_q5_*_ref, and
// decoders as dequantize_row_q5_*) and Q8_1 activation rows (as quantize_row_q8_1 on AVX2).
#include <algorithm>
#include <cmath>

#include "model/kernels/cpu/quantize.h"

namespace tpnode::model::kernels {
namespace {

uint32_t loadQh(const uint8_t* qh) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  return h;
}

// Packs 32 five-bit values into ggml's qs (low nibbles, j and j + 16 share a byte) and qh.
void pack5(const uint8_t* q, uint8_t* qs, uint8_t* qh_out) {
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
    qh |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
    qh |= static_cast<uint32_t>((q[j + 16] >> 4) & 1) << (j + 16);
  }
  std::memcpy(qh_out, &qh, 4);
}

void unpack5(const uint8_t* qs, const uint8_t* qh_in, int* q) {
  const uint32_t qh = loadQh(qh_in);
  for (int j = 0; j < 16; ++j) {
    q[j] = (qs[j] & 0xF) | static_cast<int>(((qh >> j) & 1) << 4);
    q[j + 16] = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
  }
}

}  // namespace

void quantizeRowQ5_0(const float* x, BlockQ5_0* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -16;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    y[b].d = f32ToFp16(d);
    uint8_t q[32];
    for (int j = 0; j < 32; ++j) {
      q[j] = static_cast<uint8_t>(std::min(31, static_cast<int>(x[j] * id + 16.5f)));
    }
    pack5(q, y[b].qs, y[b].qh);
  }
}

void quantizeRowQ5_1(const float* x, BlockQ5_1* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    const float lo = *std::min_element(x, x + 32), hi = *std::max_element(x, x + 32);
    const float d = (hi - lo) / 31;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    y[b].d = f32ToFp16(d);
    y[b].m = f32ToFp16(lo);
    uint8_t q[32];
    for (int j = 0; j < 32; ++j) {
      q[j] = static_cast<uint8_t>(std::min(31, static_cast<int>((x[j] - lo) * id + 0.5f)));
    }
    pack5(q, y[b].qs, y[b].qh);
  }
}

void quantizeRowQ8_1(const float* x, BlockQ8_1* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.f;
    const float id = amax != 0.f ? 127.f / amax : 0.f;
    y[b].d = f32ToFp16(d);
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      y[b].qs[j] = static_cast<int8_t>(std::nearbyint(x[j] * id));
      sum += y[b].qs[j];
    }
    y[b].s = f32ToFp16(d * static_cast<float>(sum));
  }
}

void dequantizeRowQ5(TensorType type, const void* src, float* y, int64_t n) {
  int q[32];
  for (int64_t b = 0; b < n / 32; ++b, y += 32) {
    if (type == TensorType::kQ5_0) {
      const BlockQ5_0& blk = static_cast<const BlockQ5_0*>(src)[b];
      unpack5(blk.qs, blk.qh, q);
      const float d = fp16ToF32(blk.d);
      for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(q[j] - 16);
    } else {
      const BlockQ5_1& blk = static_cast<const BlockQ5_1*>(src)[b];
      unpack5(blk.qs, blk.qh, q);
      const float d = fp16ToF32(blk.d), m = fp16ToF32(blk.m);
      for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(q[j]) + m;
    }
  }
}

void dequantizeRowQ8_1(const BlockQ8_1* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp16ToF32(b[i / 32].d) * b[i / 32].qs[i % 32];
}

}  // namespace tpnode::model::kernels
