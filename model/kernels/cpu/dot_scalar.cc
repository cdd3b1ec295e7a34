// Scalar reference dot products: the definition the SIMD paths are tested against.
#include <cstddef>

#include "model/kernels/cpu/blocks.h"
#include "model/kernels/cpu/dot.h"
#include "model/kernels/cpu/quantize.h"

namespace tpnode::model::kernels {
namespace {

template <typename F>
void rows(const void* w, size_t stride, int nr, float* out, F&& one) {
  for (int r = 0; r < nr; ++r) out[r] = one(static_cast<const uint8_t*>(w) + r * stride);
}

void dotF32(int64_t n, const void* w, size_t stride, int nr, const void* a, float* out) {
  rows(w, stride, nr, out, [&](const uint8_t* row) {
    auto* x = reinterpret_cast<const float*>(row);
    auto* y = static_cast<const float*>(a);
    float s = 0;
    for (int64_t i = 0; i < n; ++i) s += x[i] * y[i];
    return s;
  });
}

void dotF16(int64_t n, const void* w, size_t stride, int nr, const void* a, float* out) {
  rows(w, stride, nr, out, [&](const uint8_t* row) {
    auto* x = reinterpret_cast<const uint16_t*>(row);
    auto* y = static_cast<const uint16_t*>(a);
    float s = 0;
    for (int64_t i = 0; i < n; ++i) s += fp16ToF32(x[i]) * fp16ToF32(y[i]);
    return s;
  });
}

void dotBF16(int64_t n, const void* w, size_t stride, int nr, const void* a, float* out) {
  rows(w, stride, nr, out, [&](const uint8_t* row) {
    auto* x = reinterpret_cast<const uint16_t*>(row);
    auto* y = static_cast<const uint16_t*>(a);
    float s = 0;
    for (int64_t i = 0; i < n; ++i) s += bf16ToF32(x[i]) * bf16ToF32(y[i]);
    return s;
  });
}

void dotQ8_0(int64_t n, const void* w, size_t stride, int nr, const void* a, float* out) {
  rows(w, stride, nr, out, [&](const uint8_t* row) {
    auto* x = reinterpret_cast<const BlockQ8_0*>(row);
    auto* y = static_cast<const BlockQ8_0*>(a);
    float s = 0;
    for (int64_t b = 0; b < n / kQK8_0; ++b) {
      int sum = 0;
      for (int j = 0; j < kQK8_0; ++j) sum += x[b].qs[j] * y[b].qs[j];
      s += fp16ToF32(x[b].d) * fp16ToF32(y[b].d) * static_cast<float>(sum);
    }
    return s;
  });
}

void dotQ4_0(int64_t n, const void* w, size_t stride, int nr, const void* a, float* out) {
  rows(w, stride, nr, out, [&](const uint8_t* row) {
    auto* x = reinterpret_cast<const BlockQ4_0*>(row);
    auto* y = static_cast<const BlockQ8_0*>(a);
    float s = 0;
    for (int64_t b = 0; b < n / kQK4_0; ++b) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) {
        sum += ((x[b].qs[j] & 0xF) - 8) * y[b].qs[j];
        sum += ((x[b].qs[j] >> 4) - 8) * y[b].qs[j + 16];
      }
      s += fp16ToF32(x[b].d) * fp16ToF32(y[b].d) * static_cast<float>(sum);
    }
    return s;
  });
}

void dotQ4K(int64_t n, const void* w, size_t stride, int nr, const void* a, float* out) {
  rows(w, stride, nr, out, [&](const uint8_t* row) {
    auto* x = reinterpret_cast<const BlockQ4K*>(row);
    auto* y = static_cast<const BlockQ8K*>(a);
    float s = 0;
    for (int64_t b = 0; b < n / kQKK; ++b) {
      int sumi = 0, summ = 0;
      const uint8_t* q4 = x[b].qs;
      const int8_t* q8 = y[b].qs;
      for (int j = 0; j < 4; ++j, q4 += 32, q8 += 64) {
        uint8_t s0, m0, s1, m1;
        q4kScaleMin(2 * j, x[b].scales, s0, m0);
        q4kScaleMin(2 * j + 1, x[b].scales, s1, m1);
        int lo = 0, hi = 0;
        for (int l = 0; l < 32; ++l) {
          lo += (q4[l] & 0xF) * q8[l];
          hi += (q4[l] >> 4) * q8[l + 32];
        }
        sumi += s0 * lo + s1 * hi;
        summ += m0 * (y[b].bsums[4 * j] + y[b].bsums[4 * j + 1]) +
                m1 * (y[b].bsums[4 * j + 2] + y[b].bsums[4 * j + 3]);
      }
      const float d = y[b].d * fp16ToF32(x[b].d), dmin = y[b].d * fp16ToF32(x[b].dmin);
      s += d * static_cast<float>(sumi) - dmin * static_cast<float>(summ);
    }
    return s;
  });
}

void dotQ6K(int64_t n, const void* w, size_t stride, int nr, const void* a, float* out) {
  rows(w, stride, nr, out, [&](const uint8_t* row) {
    auto* x = reinterpret_cast<const BlockQ6K*>(row);
    auto* y = static_cast<const BlockQ8K*>(a);
    float s = 0;
    for (int64_t b = 0; b < n / kQKK; ++b) {
      int sumi = 0;
      for (int h = 0; h < 2; ++h) {
        const uint8_t* ql = x[b].ql + 64 * h;
        const uint8_t* qh = x[b].qh + 32 * h;
        const int8_t* sc = x[b].scales + 8 * h;
        const int8_t* q8 = y[b].qs + 128 * h;
        int part[8] = {};
        for (int l = 0; l < 32; ++l) {
          int is = l / 16;
          part[is + 0] += (((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32) * q8[l];
          part[is + 2] += (((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32) * q8[l + 32];
          part[is + 4] += (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32) * q8[l + 64];
          part[is + 6] += (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32) * q8[l + 96];
        }
        for (int k = 0; k < 8; ++k) sumi += sc[k] * part[k];
      }
      s += fp16ToF32(x[b].d) * y[b].d * static_cast<float>(sumi);
    }
    return s;
  });
}

// Q5_0/Q5_1 value j of a block: low nibble from qs, bit 4 from qh (ggml's dequantize_row_q5_*).
inline int q5Value(const uint8_t* qs, const uint8_t* qh, int j) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  const int nib = j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4);
  return nib | static_cast<int>(((h >> j) & 1) << 4);
}

void dotQ5_0(int64_t n, const void* w, size_t stride, int nr, const void* a, float* out) {
  rows(w, stride, nr, out, [&](const uint8_t* row) {
    auto* x = reinterpret_cast<const BlockQ5_0*>(row);
    auto* y = static_cast<const BlockQ8_0*>(a);
    float s = 0;
    for (int64_t b = 0; b < n / 32; ++b) {
      int sum = 0;
      for (int j = 0; j < 32; ++j) sum += (q5Value(x[b].qs, x[b].qh, j) - 16) * y[b].qs[j];
      s += fp16ToF32(x[b].d) * fp16ToF32(y[b].d) * static_cast<float>(sum);
    }
    return s;
  });
}

void dotQ5_1(int64_t n, const void* w, size_t stride, int nr, const void* a, float* out) {
  rows(w, stride, nr, out, [&](const uint8_t* row) {
    auto* x = reinterpret_cast<const BlockQ5_1*>(row);
    auto* y = static_cast<const BlockQ8_1*>(a);
    float s = 0;
    for (int64_t b = 0; b < n / 32; ++b) {
      int sum = 0;
      for (int j = 0; j < 32; ++j) sum += q5Value(x[b].qs, x[b].qh, j) * y[b].qs[j];
      s += fp16ToF32(x[b].d) * fp16ToF32(y[b].d) * static_cast<float>(sum) +
           fp16ToF32(x[b].m) * fp16ToF32(y[b].s);
    }
    return s;
  });
}

void axpyF32(int64_t n, const void* rows, size_t stride, int nr, const float* w, float* out) {
  for (int r = 0; r < nr; ++r) {
    const float* x = reinterpret_cast<const float*>(static_cast<const uint8_t*>(rows) + r * stride);
    for (int64_t i = 0; i < n; ++i) out[i] += w[r] * x[i];
  }
}

void quantizeQ8K(const float* x, void* y, int64_t n) {
  quantizeRowQ8K(x, static_cast<BlockQ8K*>(y), n);
}

void quantizeQ8_0(const float* x, void* y, int64_t n) {
  quantizeRowQ8_0(x, static_cast<BlockQ8_0*>(y), n);
}

}  // namespace

const DotKernels& scalarKernels() {
  static const DotKernels k{.isa = "scalar",
                            .f32 = dotF32,
                            .f16 = dotF16,
                            .bf16 = dotBF16,
                            .q8_0 = dotQ8_0,
                            .q4_0 = dotQ4_0,
                            .q4_k = dotQ4K,
                            .q6_k = dotQ6K,
                            .q5_0 = dotQ5_0,
                            .q5_1 = dotQ5_1,
                            .f32_axpy = axpyF32,
                            .quantize_q8_k = quantizeQ8K,
                            .quantize_q8_0 = quantizeQ8_0};
  return k;
}

}  // namespace tpnode::model::kernels
