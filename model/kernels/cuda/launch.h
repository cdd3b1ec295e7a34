// Kernel launchers (internal): implemented in the .cu files, called by kernels.cc, which checks
// the arguments and turns launch errors into tpnode::Error. Kept apart so that nvcc never
// compiles the project's fmt-based error code. Each launcher only enqueues (no allocation, no
// synchronisation); a returned error comes from a CUDA runtime call it made before launching.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "model/kernels/cuda/kernels.h"
#include "model/kernels/cuda/layout.cuh"

namespace tpnode::model::cuda::launch {

// type/layout must be supported (supportsType); 1 <= n_tokens; n_tokens <= 8 runs the GEMV.
void matmul(TensorType type, int layout, const WeightView& w, const float* x, int64_t n_tokens,
            float* y, int64_t y_stride, cudaStream_t stream);
void embed(TensorType type, int layout, const WeightView& w, const int32_t* tokens,
           int64_t n_tokens, float scale, float* out, cudaStream_t stream);
void rmsNorm(const float* x, const float* w, float* y, int64_t n_rows, int64_t dim, float eps,
             cudaStream_t stream);
void rope(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, int64_t n_rot,
          const int32_t* positions, float theta_scale, float freq_scale, bool neox,
          const float* freq_factors, cudaStream_t stream);
void addBias(float* y, const float* b, int64_t n_tokens, int64_t width, cudaStream_t stream);
void gatedAct(float* g, const float* u, int64_t n, bool gelu, cudaStream_t stream);
void add(float* x, const float* y, int64_t n, cudaStream_t stream);
void gatherRows(const float* src, const int32_t* rows, int64_t n_rows, int64_t width, float* dst,
                cudaStream_t stream);
void softcap(float* x, int64_t n, float c, cudaStream_t stream);
void kvWrite(const KvView& kv, int64_t layer, const float* k, const float* v, int64_t n_tokens,
             const int32_t* table_offsets, const int32_t* positions, cudaStream_t stream);
// Dynamic shared memory bytes the attention kernel needs, and the setup for more than 48 KiB
// (cudaFuncSetAttribute; returns its error).
size_t attentionSharedBytes(int64_t head_dim, int64_t max_len);
cudaError_t attentionAllowShared(size_t bytes);
void attention(const KvView& kv, int64_t layer, const float* q, float* out, int64_t n_tokens,
               int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale, int64_t window,
               const int32_t* table_offsets, const int32_t* positions, int64_t max_len,
               cudaStream_t stream);

}  // namespace tpnode::model::cuda::launch
