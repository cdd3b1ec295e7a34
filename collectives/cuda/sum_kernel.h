// The add kernel of the peer-to-peer transport: out[i] = ((src[0][i] + src[1][i]) + ...) +
// src[n-1][i] in f32, sources in the given order (the fixed summation order of docs/gpu.md).
// Sources may live on other devices (peer access enabled) and `out` may alias any source only
// if it is that source exactly (element i is read before it is written, by the same thread).
// Plain C++ interface so that .cc files need not be compiled by nvcc.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace tpnode::collectives::cuda {

inline constexpr int kMaxSumSources = 16;

struct SumSources {
  const float* src[kMaxSumSources];
  int count;
};

// Enqueues the kernel on `stream`; returns the launch error (cudaSuccess when launched).
cudaError_t launchSum(float* out, const SumSources& sources, size_t count, cudaStream_t stream);

}  // namespace tpnode::collectives::cuda
