#include "collectives/cuda/sum_kernel.h"

#include <cstdint>

namespace tpnode::collectives::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 1024;

// Vectorised body: n4 float4 elements, every pointer 16-byte aligned.
__global__ void sumKernel4(float4* out, SumSources sources, size_t n4) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += stride) {
    float4 acc = reinterpret_cast<const float4*>(sources.src[0])[i];
    for (int s = 1; s < sources.count; ++s) {
      const float4 v = reinterpret_cast<const float4*>(sources.src[s])[i];
      acc.x = __fadd_rn(acc.x, v.x);
      acc.y = __fadd_rn(acc.y, v.y);
      acc.z = __fadd_rn(acc.z, v.z);
      acc.w = __fadd_rn(acc.w, v.w);
    }
    out[i] = acc;
  }
}

// Scalar body over [begin, end).
__global__ void sumKernel1(float* out, SumSources sources, size_t begin, size_t end) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = begin + static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < end;
       i += stride) {
    float acc = sources.src[0][i];
    for (int s = 1; s < sources.count; ++s) acc = __fadd_rn(acc, sources.src[s][i]);
    out[i] = acc;
  }
}

int blocksFor(size_t n) {
  const size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

}  // namespace

cudaError_t launchSum(float* out, const SumSources& sources, size_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (sources.count < 1 || sources.count > kMaxSumSources) return cudaErrorInvalidValue;
  uintptr_t bits = reinterpret_cast<uintptr_t>(out);
  for (int s = 0; s < sources.count; ++s) bits |= reinterpret_cast<uintptr_t>(sources.src[s]);
  size_t done = 0;
  if ((bits & 15u) == 0 && count >= 4) {
    const size_t n4 = count / 4;
    sumKernel4<<<blocksFor(n4), kThreads, 0, stream>>>(reinterpret_cast<float4*>(out), sources, n4);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    done = n4 * 4;
  }
  if (done < count) {
    sumKernel1<<<blocksFor(count - done), kThreads, 0, stream>>>(out, sources, done, count);
    return cudaGetLastError();
  }
  return cudaSuccess;
}

}  // namespace tpnode::collectives::cuda
