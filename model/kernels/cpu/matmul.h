// Matrix-vector and matrix-matrix products on a rank's weight slices. Activations are first
// converted to the weight type's activation type (Q8_0 / Q8_K / F16 / BF16 / F32, see dot.h),
// once per token, then each thread takes a range of weight rows and runs it against every
// token, so a weight row is read from memory once per call.
#pragma once

#include <cstdint>
#include <vector>

#include "model/kernels/cpu/thread_pool.h"
#include "model/weights.h"

namespace tpnode::model::kernels {

// y[t * y_stride + r] = dot(w.row(r), x[t * w.cols ...]) for t < n_tokens, r < w.rows.
// `scratch` is reused between calls (grown as needed).
void matmul(const Matrix& w, const float* x, int64_t n_tokens, float* y, int64_t y_stride,
            ThreadPool& pool, std::vector<uint8_t>& scratch);

// Row r of w as floats (embedding lookup).
void dequantizeMatrixRow(const Matrix& w, int64_t r, float* out);

}  // namespace tpnode::model::kernels
