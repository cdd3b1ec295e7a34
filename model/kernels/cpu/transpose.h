// A block of floats transposed: for gathers that a kernel then reads along the other axis
// (attention's V cells, model/attention.cc). Pure; callable from any thread.
#pragma once

#include <cstdint>

namespace tpnode::model::kernels {

// dst[c * dst_stride + r] = src[r * src_stride + c] for r < rows, c < cols (strides in floats;
// the two blocks must not overlap). 8 x 8 tiles through AVX registers where the CPU has AVX,
// element by element at the edges and elsewhere; the values are copied, never computed.
void transposeFloats(const float* src, int64_t src_stride, int64_t rows, int64_t cols, float* dst,
                     int64_t dst_stride);

}  // namespace tpnode::model::kernels
