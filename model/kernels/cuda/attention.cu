// KV cache write and causal grouped-query attention over the cache (kernels.h). Softmax as the
// CPU (model/kernels/cpu/ops.cc softmax): subtract the maximum, exponentiate, normalise.
#include "model/kernels/cuda/launch.h"
#include "model/kernels/cuda/reduce.cuh"

namespace tpnode::model::cuda {
namespace {

constexpr int kKvThreads = 256;
constexpr int kAttnThreads = 256;

// The first float of position `pos` in `table` (KvView), or -1 for a block outside the cache
// (the host checks the tables; a bad one must not reach outside the cache).
__device__ inline int64_t kvAt(const KvView& kv, int64_t layer, const int32_t* table, int64_t pos) {
  const uint32_t p = static_cast<uint32_t>(pos);
  const uint32_t i = kv.per_block.div(p);
  const int64_t block = table[i];
  if (block < 0 || block >= kv.n_blocks) return -1;
  return ((layer * kv.n_blocks + block) * kv.block_size + kv.per_block.mod(p, i)) * kv.row;
}

// Block per token. A position outside the cache is skipped (the host checks them).
__global__ void kvWriteKernel(KvView kv, int64_t layer, const float* __restrict__ k,
                              const float* __restrict__ v,
                              const int32_t* __restrict__ table_offsets,
                              const int32_t* __restrict__ positions) {
  const int64_t t = blockIdx.x;
  const int64_t off = table_offsets[t], pos = positions[t];
  if (off < 0 || pos < 0) return;
  const int64_t at = kvAt(kv, layer, kv.tables + off, pos);
  if (at < 0) return;
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
                    const int32_t* __restrict__ table_offsets,
                    const int32_t* __restrict__ positions, int64_t max_len) {
  extern __shared__ float shared[];
  __shared__ float scratch[kWarpSize];
  float* qs = shared;
  float* scores = shared + head_dim;
  const int64_t h = blockIdx.x, t = blockIdx.y;
  const int64_t kvh = h / group;
  const int64_t off = table_offsets[t], pos = positions[t];
  float* o = out + (t * n_heads + h) * head_dim;
  const int64_t first = window > 0 ? max(int64_t{0}, pos + 1 - window) : int64_t{0};
  const int64_t len = pos + 1 - first;
  int bad = off < 0 || pos < 0 || len > max_len ? 1 : 0;  // the same on every thread
  const int32_t* table = kv.tables + (bad ? 0 : off);
  // The blocks of [first, pos], checked by the threads together.
  for (int64_t b = first / kv.block_size + threadIdx.x; !bad && b <= pos / kv.block_size;
       b += blockDim.x) {
    if (table[b] < 0 || table[b] >= kv.n_blocks) bad = 1;
  }
  if (__syncthreads_or(bad)) {
    // Outside the contract (the host checks these): NaN makes the mistake visible.
    for (int64_t d = threadIdx.x; d < head_dim; d += blockDim.x) o[d] = __int_as_float(0x7fc00000);
    return;
  }
  const float* qh = q + (t * n_heads + h) * head_dim;
  for (int64_t d = threadIdx.x; d < head_dim; d += blockDim.x) qs[d] = qh[d];
  __syncthreads();
  // Position p's rows of this kv head: kb + at(p), vb + at(p).
  const float* kb = kv.k + kvh * head_dim;
  const float* vb = kv.v + kvh * head_dim;
  auto at = [&](int64_t p) { return kvAt(kv, layer, table, p); };
  // Scores: warp per position, lanes over the head dims.
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int warps = static_cast<int>(blockDim.x) / kWarpSize;
  for (int64_t i = warp; i < len; i += warps) {
    const float* kr = kb + at(first + i);
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
      for (int64_t i = 0; i < len; ++i) acc += scores[i] * vb[at(first + i) + d];
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
    for (int64_t i = g; i < len; i += groups) acc += scores[i] * vb[at(first + i) + d];
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
                     int64_t n_tokens, const int32_t* table_offsets, const int32_t* positions,
                     cudaStream_t stream) {
  kvWriteKernel<<<static_cast<unsigned>(n_tokens), kKvThreads, 0, stream>>>(
      kv, layer, k, v, table_offsets, positions);
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
                       float scale, int64_t window, const int32_t* table_offsets,
                       const int32_t* positions, int64_t max_len, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(n_heads), static_cast<unsigned>(n_tokens));
  attentionKernel<<<grid, kAttnThreads, attentionSharedBytes(head_dim, max_len), stream>>>(
      kv, layer, q, out, n_heads, n_heads / n_kv_heads, head_dim, scale, window, table_offsets,
      positions, max_len);
}

}  // namespace tpnode::model::cuda
