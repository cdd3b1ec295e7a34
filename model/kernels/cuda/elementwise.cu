// Per-row and element-wise kernels of kernels.h: embed, rmsNorm, rope, addBias, gatedAct,
// add, gatherRows, softcap. Numerics follow model/kernels/cpu/ops.cc and gelu.cc.
#include <algorithm>

#include "model/kernels/cuda/launch.h"
#include "model/kernels/cuda/reduce.cuh"

namespace tpnode::model::cuda {
namespace {

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n elements.
unsigned gridFor(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, 65535 * 4));
}

// ---- embed: block per token, threads over 8-value chunks of the row.
template <class R>
__global__ void embedKernel(WeightView w, const int32_t* __restrict__ tokens, float scale,
                            float* __restrict__ out) {
  const int64_t t = blockIdx.x;
  const int64_t cols = w.cols;
  float* o = out + t * cols;
  const int64_t id = tokens[t];
  if (id < 0 || id >= w.rows) {  // the host checks ids; never read outside the table
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) o[j] = 0.f;
    return;
  }
  const int64_t chunks = cols / 8;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    float v[8];
    R::load8(w, id, c * 8, v);
#pragma unroll
    for (int i = 0; i < 8; ++i) o[c * 8 + i] = v[i] * scale;
  }
  if constexpr (R::kElementwise) {
    for (int64_t j = chunks * 8 + threadIdx.x; j < cols; j += blockDim.x) {
      o[j] = R::value(w, id, j) * scale;
    }
  }
}

// ---- rmsNorm: block per row; squares summed in double as the CPU does.
__global__ void rmsNormKernel(const float* x, const float* __restrict__ w, float* y, int64_t dim,
                              float eps) {
  __shared__ double scratch[kWarpSize];
  const float* xr = x + blockIdx.x * dim;
  float* yr = y + blockIdx.x * dim;
  double sum = 0;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    sum += static_cast<double>(xr[i] * xr[i]);
  }
  sum = blockSum(sum, scratch);
  const float mean = static_cast<float>(sum / static_cast<double>(dim));
  const float scale = 1.0f / sqrtf(mean + eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    float v = xr[i] * scale;
    if (w) v *= w[i];
    yr[i] = v;
  }
}

// ---- rope: block per (head, token), thread per rotated pair. The angle is built by the same
// repeated float multiplication as the CPU kernel (theta_i = pos * theta_scale^i, in order).
__global__ void ropeKernel(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot,
                           const int32_t* __restrict__ positions, float theta_scale,
                           float freq_scale, int neox, const float* __restrict__ freq_factors) {
  const int64_t h = blockIdx.x, t = blockIdx.y;
  float* v = x + (t * n_heads + h) * head_dim;
  const float pos = static_cast<float>(positions[t]);
  for (int64_t p = threadIdx.x; p < n_rot / 2; p += blockDim.x) {
    float theta = pos;
    for (int64_t i = 0; i < p; ++i) theta *= theta_scale;
    const float ff = freq_factors ? freq_factors[p] : 1.0f;
    const float ang = freq_scale * (theta / ff);
    float s, c;
    sincosf(ang, &s, &c);
    const int64_t a = neox ? p : 2 * p;
    const int64_t b = neox ? p + n_rot / 2 : 2 * p + 1;
    const float x0 = v[a], x1 = v[b];
    v[a] = x0 * c - x1 * s;
    v[b] = x0 * s + x1 * c;
  }
}

__global__ void addBiasKernel(float* y, const float* __restrict__ b, int64_t n, int64_t width) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] += b[i % width];
  }
}

__device__ __forceinline__ float geluTanh(float x) {
  constexpr float kA = 0.044715f;
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * x * (1.0f + kA * x * x)));
}

// act 0: silu; 1: gelu through f16 rounding of the gate and of the result (the CPU's table).
__global__ void gatedActKernel(float* g, const float* __restrict__ u, int64_t n, int act) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float x = g[i];
    float r;
    if (act == 0) {
      r = x / (1.0f + expf(-x)) * u[i];
    } else if (x <= -10.0f) {
      r = 0.0f;
    } else if (x >= 10.0f) {
      r = x * u[i];
    } else {
      const float xh = dq::f16ToF32(dq::f32ToF16(x));
      r = dq::f16ToF32(dq::f32ToF16(geluTanh(xh))) * u[i];
    }
    g[i] = r;
  }
}

__global__ void addKernel(float* x, const float* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    x[i] += y[i];
  }
}

__global__ void softcapKernel(float* x, int64_t n, float c) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    x[i] = c * tanhf(x[i] / c);
  }
}

// Block per output row. A negative row id writes zeros (ids are the caller's, never read
// outside src's bounds is the caller's contract; negative ones are caught here).
__global__ void gatherRowsKernel(const float* __restrict__ src, const int32_t* __restrict__ rows,
                                 int64_t width, float* __restrict__ dst) {
  const int64_t i = blockIdx.x;
  const int64_t r = rows[i];
  float* d = dst + i * width;
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) d[j] = r < 0 ? 0.f : src[r * width + j];
}

}  // namespace

void launch::embed(TensorType type, int layout, const WeightView& w, const int32_t* tokens,
                   int64_t n_tokens, float scale, float* out, cudaStream_t stream) {
  withReader(type, layout, [&](auto reader) {
    embedKernel<decltype(reader)>
        <<<static_cast<unsigned>(n_tokens), kThreads, 0, stream>>>(w, tokens, scale, out);
  });
}

void launch::rmsNorm(const float* x, const float* w, float* y, int64_t n_rows, int64_t dim,
                     float eps, cudaStream_t stream) {
  const int threads = dim >= 1024 ? 1024 : dim >= 256 ? 256 : 64;
  rmsNormKernel<<<static_cast<unsigned>(n_rows), threads, 0, stream>>>(x, w, y, dim, eps);
}

void launch::rope(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, int64_t n_rot,
                  const int32_t* positions, float theta_scale, float freq_scale, bool neox,
                  const float* freq_factors, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(n_heads), static_cast<unsigned>(n_tokens));
  const int threads = n_rot / 2 >= 128 ? 128 : 64;
  ropeKernel<<<grid, threads, 0, stream>>>(x, n_heads, head_dim, n_rot, positions, theta_scale,
                                           freq_scale, neox ? 1 : 0, freq_factors);
}

void launch::addBias(float* y, const float* b, int64_t n_tokens, int64_t width,
                     cudaStream_t stream) {
  const int64_t n = n_tokens * width;
  addBiasKernel<<<gridFor(n), kThreads, 0, stream>>>(y, b, n, width);
}

void launch::gatedAct(float* g, const float* u, int64_t n, bool gelu, cudaStream_t stream) {
  gatedActKernel<<<gridFor(n), kThreads, 0, stream>>>(g, u, n, gelu ? 1 : 0);
}

void launch::add(float* x, const float* y, int64_t n, cudaStream_t stream) {
  addKernel<<<gridFor(n), kThreads, 0, stream>>>(x, y, n);
}

void launch::gatherRows(const float* src, const int32_t* rows, int64_t n_rows, int64_t width,
                        float* dst, cudaStream_t stream) {
  gatherRowsKernel<<<static_cast<unsigned>(n_rows), kThreads, 0, stream>>>(src, rows, width, dst);
}

void launch::softcap(float* x, int64_t n, float c, cudaStream_t stream) {
  softcapKernel<<<gridFor(n), kThreads, 0, stream>>>(x, n, c);
}

}  // namespace tpnode::model::cuda
