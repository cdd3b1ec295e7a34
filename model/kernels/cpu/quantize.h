// Row conversions between float and ggml's block types (scalar; for activations, tests and
// tools). Rows hold n values; n must be a multiple of the type's block size.
//
// Activation quantizers reproduce llama.cpp's x86 CPU backend bit for bit:
// - quantizeRowQ8_0: as quantize_row_q8_0 on AVX: d = amax / 127 stored as f16,
//   q = round-to-nearest-even(x * (127 / amax)).
// - quantizeRowQ8K: as quantize_row_q8_K_ref: iscale = -127 / (signed value of max |x|),
//   q = min(127, nearest-even(iscale * x)), d = 1 / iscale as f32, bsums of 16.
// Weight quantizers (Q4_0, Q4_K, Q6_K) are simple round-to-nearest encoders for test models;
// they produce valid blocks, not llama-quantize's optimised ones.
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/kernels/cpu/blocks.h"
#include "model/tensor_type.h"

namespace tpnode::model::kernels {

void quantizeRowQ8_0(const float* x, BlockQ8_0* y, int64_t n);
void quantizeRowQ8K(const float* x, BlockQ8K* y, int64_t n);
void quantizeRowQ4_0(const float* x, BlockQ4_0* y, int64_t n);
void quantizeRowQ4K(const float* x, BlockQ4K* y, int64_t n);
void quantizeRowQ6K(const float* x, BlockQ6K* y, int64_t n);
// quantize_q5.cc: Q5_0/Q5_1 weights (ggml's *_ref encoders), Q8_1 activations (AVX2 rule:
// as Q8_0, plus s = f16(d * sum(q))).
void quantizeRowQ5_0(const float* x, BlockQ5_0* y, int64_t n);
void quantizeRowQ5_1(const float* x, BlockQ5_1* y, int64_t n);
void quantizeRowQ8_1(const float* x, BlockQ8_1* y, int64_t n);
void dequantizeRowQ5(TensorType type, const void* src, float* y, int64_t n);  // Q5_0 or Q5_1
void dequantizeRowQ8_1(const BlockQ8_1* src, float* y, int64_t n);

// Encodes n floats as `type` (F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q5_1, Q8_1, Q4_K, Q6_K, Q8_K) into
// dst (rowBytes(type, n) bytes).
void quantizeRow(TensorType type, const float* x, void* dst, int64_t n);

// Decodes n values of `type` (F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q5_1, Q8_1, Q4_K, Q6_K, Q8_K) into
// y.
void dequantizeRow(TensorType type, const void* src, float* y, int64_t n);

}  // namespace tpnode::model::kernels
