// Warp and block reductions for the CUDA kernels (internal). Block reductions need every
// thread of the block to call them (they contain __syncthreads) and blockDim.x a multiple of
// 32, at most 1024.
#pragma once

#include <cuda_runtime.h>

namespace tpnode::model::cuda {

constexpr int kWarpSize = 32;

template <class T>
__device__ __forceinline__ T warpSum(T v) {
#pragma unroll
  for (int off = kWarpSize / 2; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

__device__ __forceinline__ float warpMax(float v) {
#pragma unroll
  for (int off = kWarpSize / 2; off > 0; off /= 2) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  }
  return v;
}

// Sum over the block; every thread gets the result. `scratch` holds 32 values.
template <class T>
__device__ T blockSum(T v, T* scratch) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int warps = static_cast<int>(blockDim.x) / kWarpSize;
  v = warpSum(v);
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T r = lane < warps ? scratch[lane] : T(0);
  return warpSum(r);
}

__device__ inline float blockMax(float v, float* scratch) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int warps = static_cast<int>(blockDim.x) / kWarpSize;
  v = warpMax(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const float r = lane < warps ? scratch[lane] : -INFINITY;
  return warpMax(r);
}

}  // namespace tpnode::model::cuda
