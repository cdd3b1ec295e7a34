// Matrix-vector and matrix-matrix products on a rank's weight slices. Activations are first
// converted to the weight type's activation type (Q8_0 / Q8_K / F16 / BF16 / F32, see dot.h),
// once per token, then each thread takes a range of weight rows and runs it against every
// token, so a weight row is read from memory once per call.
#pragma once

#include <cstdint>
#include <vector>

#include "model/kernels/cpu/dot.h"
#include "model/kernels/cpu/thread_pool.h"
#include "model/weights.h"

namespace tpnode::model::kernels {

// y[t * y_stride + r] = dot(w.row(r), x[t * w.cols ...]) for t < n_tokens, r < w.rows.
// `scratch` is reused between calls (grown as needed). `k` is the kernel table; a matrix packed
// for one table (packWeights) runs with that table (benchmarks compare tables side by side).
void matmul(const Matrix& w, const float* x, int64_t n_tokens, float* y, int64_t y_stride,
            ThreadPool& pool, std::vector<uint8_t>& scratch, const DotKernels& k = bestKernels());

// A matmul's converted activations, kept for the next matmul of the same input (a layer's
// Q/K/V or gate/up projections): it skips the conversion when its weights take the same
// activations (type, width, tokens, kernel table) and offsets (x16 Q8_0 / Q4_0 / Q5_0 weight
// type). The holder owns one per thread that calls matmul.
struct MatmulScratch {
  std::vector<uint8_t> bytes;
  bool acts_valid = false;  // bytes start with the activations of the last call's x:
  TensorType acts_type = TensorType::kF32;
  bool acts_widened = false;
  int64_t acts_cols = 0, acts_tokens = 0;
  const DotKernels* acts_table = nullptr;
  bool offs_valid = false;  // and, after them, the offsets for weights of offs_type
  TensorType offs_type = TensorType::kF32;
};

// matmul with a MatmulScratch. same_x: x holds the values (and n_tokens the count) of the
// previous call with this scratch, so activations it converted then are reused where they fit.
void matmul(const Matrix& w, const float* x, int64_t n_tokens, float* y, int64_t y_stride,
            ThreadPool& pool, MatmulScratch& scratch, bool same_x,
            const DotKernels& k = bestKernels());

// Bytes of MatmulScratch a matmul of w over n_tokens rows takes (its converted activations and,
// for the 16-row Q8_0 / Q4_0 / Q5_0 kernels, their offsets); 0 where it reads x as it is. A
// holder commits that many up front (LlamaRank::reserveBatch) so that its first batch of that
// size does not fault the pages in.
size_t matmulScratchBytes(const Matrix& w, int64_t n_tokens, const DotKernels& k = bestKernels());

// Weight layouts the kernels read, chosen once at load time.
//   kPlain   rows as in the file
//   kRows4   groups of 4 rows block-interleaved (interleaveRows4), for the 4-row kernels
//   kAuto    the fastest the kernel table has: Q4_K, Q6_K, Q8_0, Q4_0, Q5_0 and Q5_1 with
//            rows % 16 == 0 on AVX-512 are repacked 16 rows per group (q4k_x16.h, q6k_x16.h,
//            q0_x16.h; interleave 16),
//            else kRows4 where a 4-row kernel exists, else plain (F16 / BF16 stay plain: their
//            prefill tiles read plain rows)
enum class WeightLayout { kAuto, kPlain, kRows4 };

// Returns m (a plain matrix) rewritten into `layout` where the kernels support it, otherwise
// in the next one down (kAuto -> kRows4 -> kPlain).
Matrix packWeights(Matrix m, WeightLayout layout = WeightLayout::kAuto,
                   const DotKernels& k = bestKernels());

// Rows [g * w.interleave, (g + 1) * w.interleave) of w as the file stores them, whatever w's
// layout (interleave x rowBytes(w.type, w.cols) bytes): the one inverse of packWeights.
void matrixGroupBytes(const Matrix& w, int64_t g, uint8_t* out);

// Row r of w as the file stores it (rowBytes(w.type, w.cols) bytes), whatever w's layout.
void matrixRowBytes(const Matrix& w, int64_t r, uint8_t* out);

// Row r of w as floats (embedding lookup), whatever w's layout: a tied head packed for the
// kernels serves the lookups too.
void dequantizeMatrixRow(const Matrix& w, int64_t r, float* out);

}  // namespace tpnode::model::kernels
