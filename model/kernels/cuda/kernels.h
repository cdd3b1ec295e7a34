// CUDA kernels of one GPU rank's forward pass (the GPU twin of model/kernels/cpu/).
//
// Contract
// - Every function enqueues work on `stream` and returns without synchronising; pointers are
//   device memory of the current device (the caller sets it with cudaSetDevice) unless a
//   parameter says "host". Launch errors are checked (TP_CUDA on cudaGetLastError) and thrown
//   as tpnode::Error.
// - Graph capture: nothing here allocates, synchronises or reads device memory on the host
//   while enqueueing, so every call may be recorded into a CUDA graph. Values that change from
//   step to step (token ids, positions, slots) are read by the kernels from device arrays, so
//   a captured graph stays valid when only those arrays' contents change.
// - Numerics: activations are f32; weights are dequantised to f32 inside the kernels (exact
//   for every GGUF type); products accumulate in f32. Results match the CPU kernels (which
//   quantise activations to Q8 as llama.cpp's CPU backend does) within that quantisation noise,
//   not bit for bit.
// - Threads: none of these hold state; a DeviceMatrix is immutable after upload and may be read
//   by concurrent streams.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "model/config.h"
#include "model/kernels/cuda/fast_div.h"
#include "model/tensor_type.h"
#include "model/weights.h"

namespace tpnode::model::cuda {

// A weight matrix on the device: `rows` outputs of `cols` inputs. The device layout is the
// kernels' own (see uploadMatrix); callers only pass it back to these functions.
struct DeviceMatrix {
  TensorType type = TensorType::kF32;
  int64_t rows = 0, cols = 0;
  int layout = 0;        // kernels' private layout tag
  void* data = nullptr;  // owned by DeviceMatrixStore (below)
  size_t bytes = 0;
  bool empty() const { return rows == 0; }
};

// True when the kernels run this weight type (F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q5_1,
// Q4_K, Q6_K). The loader refuses others with Error(kUnsupported) naming the tensor.
bool supportsType(TensorType type);

// Copies a plain host matrix (interleave 1, GGUF row layout) to the device in the kernels'
// layout. Allocates with cudaMalloc; the returned matrix's memory is released by
// freeMatrix. Synchronous (the host matrix may be freed on return).
DeviceMatrix uploadMatrix(const Matrix& host);
void freeMatrix(DeviceMatrix& m);

// Device scratch the matmul needs for large batches (dequantised weight tiles). Sized once by
// the caller: matmulWorkspaceBytes(largest matrix cols) and reused by every call on one stream.
size_t matmulWorkspaceBytes(int64_t max_cols);

// y[t * y_stride + r] = sum_c W[r][c] * x[t * w.cols + c]   for t < n_tokens, r < w.rows.
// n_tokens <= 8: a dequantising GEMV that reads each weight once for all tokens (decode);
// larger batches: a tiled GEMM that dequantises weight tiles (into shared memory or
// `workspace`, the kernels' choice; no cuBLAS). workspace may be null when
// matmulWorkspaceBytes returned 0.
void matmul(const DeviceMatrix& w, const float* x, int64_t n_tokens, float* y, int64_t y_stride,
            void* workspace, size_t workspace_bytes, cudaStream_t stream);

// out[t][*] = row tokens[t] of `table` (dequantised) * scale, for t < n_tokens.
// tokens: device int32 array; ids are checked on the host before the step.
void embed(const DeviceMatrix& table, const int32_t* tokens, int64_t n_tokens, float scale,
           float* out, cudaStream_t stream);

// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w   for rows r < n_rows of `dim` floats. w may be
// null (no weight); y may equal x. Used for the block norms (dim = n_embd) and the per-head
// q/k norms (dim = head_dim, n_rows = tokens * heads).
void rmsNorm(const float* x, const float* w, float* y, int64_t n_rows, int64_t dim, float eps,
             cudaStream_t stream);

// Rotates the first n_rot dims of each head vector of x[n_tokens][n_heads][head_dim] in place,
// token t at position positions[t] (device int32). freq_factors: null or n_rot / 2 device
// floats (llama3 rope_freqs). Same angles as the CPU kernel (kernels/cpu/ops.h rope).
void rope(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, int64_t n_rot,
          const int32_t* positions, float base, float freq_scale, RopeStyle style,
          const float* freq_factors, cudaStream_t stream);

// y[t][j] += b[j] for t < n_tokens, j < width (qwen2 q/k/v biases).
void addBias(float* y, const float* b, int64_t n_tokens, int64_t width, cudaStream_t stream);

// KV cache of one rank: f32 [layer][slot][pos][kv_heads * head_dim] for K and V separately.
// The KV cache of one rank in blocks of `block_size` positions, laid out
// [layer][block][offset][row] for K and V separately (as the CPU ranks' KvCache). A token's
// sequence keeps its positions in the blocks of its table: position p in block
// tables[table_offsets[t] + p / block_size] at offset p % block_size. `tables` holds the
// step's tables back to back (device memory); a cache of one block per slot (block_size =
// context, table of slot s = {s}) is the contiguous per-slot layout.
struct KvView {
  float* k = nullptr;
  float* v = nullptr;
  int64_t n_blocks = 0, block_size = 0, row = 0;  // row = kv_heads * head_dim floats
  const int32_t* tables = nullptr;
  FastDiv per_block;  // FastDiv::of(block_size): set by kvView() below
};

// A KvView with its divisor set. Positions must stay below 2^31.
inline KvView kvView(float* k, float* v, int64_t n_blocks, int64_t block_size, int64_t row,
                     const int32_t* tables) {
  return {k, v, n_blocks, block_size, row, tables, FastDiv::of(static_cast<uint32_t>(block_size))};
}

// Writes k[t], v[t] (rows of `kv.row` floats) at (layer, positions[t]) of token t's table.
void kvWrite(const KvView& kv, int64_t layer, const float* k, const float* v, int64_t n_tokens,
             const int32_t* table_offsets, const int32_t* positions, cudaStream_t stream);

// Causal grouped-query attention over the cache: for token t and local query head h,
// out[t][h] = softmax(scale * q[t][h] . K[p]) V[p] over p in [first, positions[t]] of token
// t's table with kv head h / (n_heads / n_kv_heads); first = 0, or positions[t] + 1 - window
// when window > 0 (gemma3's sliding layers). Positions must already be in the cache (kvWrite
// of the same batch first). q: [n_tokens][n_heads * head_dim]; out likewise.
// `max_len` bounds positions[t] + 1 for the whole batch (host value, sizes shared memory; a
// captured graph passes the context length). The first call on a device whose scores need
// more than 48 KiB of shared memory sets the kernel's limit (cudaFuncSetAttribute, once per
// device): make it eagerly before capturing a graph (a warm-up step does).
void attention(const KvView& kv, int64_t layer, const float* q, float* out, int64_t n_tokens,
               int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale, int64_t window,
               const int32_t* table_offsets, const int32_t* positions, int64_t max_len,
               cudaStream_t stream);

// g[i] = act(g[i]) * u[i] for i < n: SwiGLU (silu) or GeGLU (gelu, tanh approximation, as the
// CPU kernel).
void gatedAct(float* g, const float* u, int64_t n, FfnAct act, cudaStream_t stream);

// x[i] += y[i]   for i < n (the residual).
void add(float* x, const float* y, int64_t n, cudaStream_t stream);

// dst[i][*] = src[rows[i]][*] for i < n_rows, rows of `width` floats (rows: device int32).
void gatherRows(const float* src, const int32_t* rows, int64_t n_rows, int64_t width, float* dst,
                cudaStream_t stream);

// x[i] = c * tanh(x[i] / c) for i < n (gemma's final logit softcap).
void softcap(float* x, int64_t n, float c, cudaStream_t stream);

}  // namespace tpnode::model::cuda
