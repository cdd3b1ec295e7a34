// KV cache write and causal grouped-query attention over the cache (kernels.h). Softmax as the
// CPU (model/kernels/cpu/ops.cc softmax): subtract the maximum, exponentiate, normalise.
#include "model/kernels/cuda/launch.h"
#include "model/kernels/cuda/reduce.cuh"

namespace tpnode::model::cuda {
namespace {

constexpr int kKvThreads = 256;
constexpr int kAttnThreads = 256;

// Block per token. A slot or position outside the cache is skipped (the host checks them).
__global__ void kvWriteKernel(KvView kv, int64_t layer, const float* __restrict__ k,
                              const float* __restrict__ v, const int32_t* __restrict__ slots,
                              const int32_t* __restrict__ positions) {
  const int64_t t = blockIdx.x;
  const int64_t slot = slots[t], pos = positions[t];
  if (slot < 0 || slot >= kv.n_slots || pos < 0 || pos >= kv.n_ctx) return;
  const int64_t at = ((layer * kv.n_slots + slot) * kv.n_ctx + pos) * kv.row;
  for (int64_t j = threadIdx.x; j < kv.row; j += blockDim.x) {
    kv.k[at + j] = k[t * kv.row + j];
    kv.v[at + j] = v[t * kv.row + j];
  }
}

// Block per (query head, token). Dynamic shared memory: q (head_dim floats), the scores of the
// positions [first, pos] (at most max_len floats), then blockDim floats of partial sums.
__global__ void __launch_bounds__(kAttnThreads)
    attentionKernel(KvView kv, int64_t layer, const float* __restrict__ q, float* __restrict__ out,
                    int64_t n_heads, int64_t group, int64_t head_dim, float scale, int64_t window,
                    const int32_t* __restrict__ slots, const int32_t* __restrict__ positions,
                    int64_t max_len) {
  extern __shared__ float shared[];
  __shared__ float scratch[kWarpSize];
  float* qs = shared;
  float* scores = shared + head_dim;
  const int64_t h = blockIdx.x, t = blockIdx.y;
  const int64_t kvh = h / group;
  const int64_t slot = slots[t], pos = positions[t];
  float* o = out + (t * n_heads + h) * head_dim;
  const int64_t first = window > 0 ? max(int64_t{0}, pos + 1 - window) : int64_t{0};
  const int64_t len = pos + 1 - first;
  if (slot < 0 || slot >= kv.n_slots || pos < 0 || pos >= kv.n_ctx || len > max_len) {
    // Outside the contract (the host checks these): NaN makes the mistake visible.
    for (int64_t d = threadIdx.x; d < head_dim; d += blockDim.x) o[d] = __int_as_float(0x7fc00000);
    return;
  }
  const float* qh = q + (t * n_heads + h) * head_dim;
  for (int64_t d = threadIdx.x; d < head_dim; d += blockDim.x) qs[d] = qh[d];
  __syncthreads();
  const size_t base = static_cast<size_t>((layer * kv.n_slots + slot) * kv.n_ctx) * kv.row +
                      static_cast<size_t>(kvh * head_dim);
  const float* kb = kv.k + base;
  const float* vb = kv.v + base;
  // Scores: warp per position, lanes over the head dims.
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int warps = static_cast<int>(blockDim.x) / kWarpSize;
  for (int64_t i = warp; i < len; i += warps) {
    const float* kr = kb + (first + i) * kv.row;
    float s = 0.f;
    for (int64_t d = lane; d < head_dim; d += kWarpSize) s += qs[d] * kr[d];
    s = warpSum(s);
    if (lane == 0) scores[i] = s * scale;
  }
  __syncthreads();
  float mx = -INFINITY;
  for (int64_t i = threadIdx.x; i < len; i += blockDim.x) mx = fmaxf(mx, scores[i]);
  mx = blockMax(mx, scratch);
  float sum = 0.f;
  for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
    const float e = expf(scores[i] - mx);
    scores[i] = e;
    sum += e;
  }
  sum = blockSum(sum, scratch);  // its barriers also publish the exponentiated scores
  const float inv = 1.0f / sum;
  const int64_t groups = head_dim <= blockDim.x ? blockDim.x / head_dim : 1;
  if (groups == 1) {  // threads over the dims, each summing every position
    for (int64_t d = threadIdx.x; d < head_dim; d += blockDim.x) {
      float acc = 0.f;
      for (int64_t i = 0; i < len; ++i) acc += scores[i] * vb[(first + i) * kv.row + d];
      o[d] = acc * inv;
    }
    return;
  }
  // `groups` thread groups of head_dim threads each sum every groups-th position; the
  // partial sums meet in shared memory (blockDim floats after the scores).
  float* part = scores + max_len;
  const int64_t g = threadIdx.x / head_dim, d = threadIdx.x % head_dim;
  if (g < groups) {
    float acc = 0.f;
    for (int64_t i = g; i < len; i += groups) acc += scores[i] * vb[(first + i) * kv.row + d];
    part[g * head_dim + d] = acc;
  }
  __syncthreads();
  if (threadIdx.x < head_dim) {
    float acc = 0.f;
    for (int64_t k = 0; k < groups; ++k) acc += part[k * head_dim + threadIdx.x];
    o[threadIdx.x] = acc * inv;
  }
}

}  // namespace

void launch::kvWrite(const KvView& kv, int64_t layer, const float* k, const float* v,
                     int64_t n_tokens, const int32_t* slots, const int32_t* positions,
                     cudaStream_t stream) {
  kvWriteKernel<<<static_cast<unsigned>(n_tokens), kKvThreads, 0, stream>>>(kv, layer, k, v, slots,
                                                                            positions);
}

size_t launch::attentionSharedBytes(int64_t head_dim, int64_t max_len) {
  return static_cast<size_t>(head_dim + max_len + kAttnThreads) * sizeof(float);
}

cudaError_t launch::attentionAllowShared(size_t bytes) {
  return cudaFuncSetAttribute(attentionKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(bytes));
}

void launch::attention(const KvView& kv, int64_t layer, const float* q, float* out,
                       int64_t n_tokens, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                       float scale, int64_t window, const int32_t* slots, const int32_t* positions,
                       int64_t max_len, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(n_heads), static_cast<unsigned>(n_tokens));
  attentionKernel<<<grid, kAttnThreads, attentionSharedBytes(head_dim, max_len), stream>>>(
      kv, layer, q, out, n_heads, n_heads / n_kv_heads, head_dim, scale, window, slots, positions,
      max_len);
}

}  // namespace tpnode::model::cuda
