// matmul (kernels.h): a dequantising GEMV for n_tokens <= 8 and a shared-memory tiled GEMM
// for larger batches. Both read weights through the per-type readers of layout.cuh.
#include "model/kernels/cuda/launch.h"

namespace tpnode::model::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kGemvWarps = 8;  // rows per block, one warp per row
constexpr int kMaxGemvTokens = 8;

// ---- GEMV: warp per row; lane l takes the reader's chunks l, l + 32, ... (8 or 16 values,
// dequantised once and multiplied with every token's x). Column tails (plain element types
// whose cols is not a multiple of 8) are read value by value.
template <class R, int kTokens>
__global__ void __launch_bounds__(kGemvWarps* kWarp)
    gemvKernel(WeightView w, const float* __restrict__ x, float* __restrict__ y, int64_t y_stride) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kGemvWarps + threadIdx.x / kWarp;
  if (row >= w.rows) return;  // the whole warp leaves together; no block barrier follows
  const int64_t cols = w.cols;
  float acc[kTokens];
#pragma unroll
  for (int t = 0; t < kTokens; ++t) acc[t] = 0.f;
  const int64_t chunks = cols / R::kGemvChunk;
  // Several chunks' loads in flight per lane (decode is bound by them); fewer for many tokens
  // (registers).
#pragma unroll(kTokens <= 2 ? 4 : 2)
  for (int64_t k = lane; k < chunks; k += kWarp) R::template gemvChunk<kTokens>(w, row, k, x, acc);
  if constexpr (R::kElementwise) {
    for (int64_t j = chunks * R::kGemvChunk + lane; j < cols; j += kWarp) {
      const float v = R::value(w, row, j);
#pragma unroll
      for (int t = 0; t < kTokens; ++t) acc[t] += v * __ldg(x + t * cols + j);
    }
  }
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    float s = acc[t];
#pragma unroll
    for (int off = kWarp / 2; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
    if (lane == 0) y[t * y_stride + row] = s;
  }
}

template <class R, int kTokens>
void launchGemv(const WeightView& w, const float* x, float* y, int64_t y_stride,
                cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((w.rows + kGemvWarps - 1) / kGemvWarps);
  gemvKernel<R, kTokens><<<blocks, kGemvWarps * kWarp, 0, stream>>>(w, x, y, y_stride);
}

template <class R>
void gemv(const WeightView& w, const float* x, int64_t n_tokens, float* y, int64_t y_stride,
          cudaStream_t stream) {
  switch (n_tokens) {
    case 1:
      return launchGemv<R, 1>(w, x, y, y_stride, stream);
    case 2:
      return launchGemv<R, 2>(w, x, y, y_stride, stream);
    case 3:
      return launchGemv<R, 3>(w, x, y, y_stride, stream);
    case 4:
      return launchGemv<R, 4>(w, x, y, y_stride, stream);
    case 5:
      return launchGemv<R, 5>(w, x, y, y_stride, stream);
    case 6:
      return launchGemv<R, 6>(w, x, y, y_stride, stream);
    case 7:
      return launchGemv<R, 7>(w, x, y, y_stride, stream);
    case 8:
      return launchGemv<R, 8>(w, x, y, y_stride, stream);
    default:
      return;  // launch::matmul sends larger batches to the GEMM
  }
}

// ---- GEMM: a block computes a 64-row x 64-token tile of y in steps of 32 columns; the weight
// tile is dequantised into shared memory (f32), the activations staged beside it. 256 threads,
// each owning 4 rows x 4 tokens.
constexpr int kTileRows = 64, kTileTokens = 64, kTileK = 32, kGemmThreads = 256;

template <class R>
__global__ void __launch_bounds__(kGemmThreads)
    gemmKernel(WeightView w, const float* __restrict__ x, int64_t n_tokens, float* __restrict__ y,
               int64_t y_stride) {
  __shared__ float ws[kTileK][kTileRows + 1];
  __shared__ float xs[kTileK][kTileTokens + 1];
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kTileRows;
  const int64_t tok0 = static_cast<int64_t>(blockIdx.y) * kTileTokens;
  const int64_t cols = w.cols;
  const int tx = tid % 16, ty = tid / 16;
  float acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
  }
  for (int64_t k0 = 0; k0 < cols; k0 += kTileK) {
    {  // weights: thread -> (row tid / 4, 8 columns at (tid % 4) * 8)
      const int r = tid / 4, kk = (tid % 4) * 8;
      const int64_t row = row0 + r, k = k0 + kk;
      float v[8];
      if (row < w.rows && k + 8 <= cols) {
        R::load8(w, row, k, v);
      } else {
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          v[i] = 0.f;
          if constexpr (R::kElementwise) {
            if (row < w.rows && k + i < cols) v[i] = R::value(w, row, k + i);
          }
        }
      }
#pragma unroll
      for (int i = 0; i < 8; ++i) ws[kk + i][r] = v[i];
    }
    // activations: thread -> (token tid / 4, 8 columns at (tid % 4) * 8)
    {
      const int t = tid / 4, kk = (tid % 4) * 8;
      const int64_t tok = tok0 + t;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const int64_t k = k0 + kk + i;
        xs[kk + i][t] = (tok < n_tokens && k < cols) ? __ldg(x + tok * cols + k) : 0.f;
      }
    }
    __syncthreads();
#pragma unroll 8
    for (int k = 0; k < kTileK; ++k) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = ws[k][tx + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = xs[k][ty + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t row = row0 + tx + 16 * i;
    if (row >= w.rows) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t tok = tok0 + ty + 16 * j;
      if (tok < n_tokens) y[tok * y_stride + row] = acc[i][j];
    }
  }
}

template <class R>
void gemm(const WeightView& w, const float* x, int64_t n_tokens, float* y, int64_t y_stride,
          cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((w.rows + kTileRows - 1) / kTileRows),
                  static_cast<unsigned>((n_tokens + kTileTokens - 1) / kTileTokens));
  gemmKernel<R><<<grid, kGemmThreads, 0, stream>>>(w, x, n_tokens, y, y_stride);
}

}  // namespace

void launch::matmul(TensorType type, int layout, const WeightView& w, const float* x,
                    int64_t n_tokens, float* y, int64_t y_stride, cudaStream_t stream) {
  withReader(type, layout, [&](auto reader) {
    using R = decltype(reader);
    if (n_tokens <= kMaxGemvTokens) {
      gemv<R>(w, x, n_tokens, y, y_stride, stream);
    } else {
      gemm<R>(w, x, n_tokens, y, y_stride, stream);
    }
  });
}

}  // namespace tpnode::model::cuda
