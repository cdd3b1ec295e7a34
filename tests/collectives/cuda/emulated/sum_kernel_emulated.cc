// The add kernel for the emulated runtime: the same order as sum_kernel.cu, on the stream's
// worker thread.
#include "collectives/cuda/sum_kernel.h"

namespace tpnode::collectives::cuda {
cudaError_t launchSum(float* out, const SumSources& sources, size_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (sources.count < 1 || sources.count > kMaxSumSources) return cudaErrorInvalidValue;
  if (!fakeKernelCanRead(out)) return cudaErrorInvalidValue;
  for (int s = 0; s < sources.count; ++s) {
    if (!fakeKernelCanRead(sources.src[s])) return cudaErrorInvalidValue;  // no peer access
  }
  return fakeEnqueue(stream, [out, sources, count] {
    for (size_t i = 0; i < count; ++i) {
      float acc = sources.src[0][i];
      for (int s = 1; s < sources.count; ++s) acc += sources.src[s][i];
      out[i] = acc;
    }
  });
}
}  // namespace tpnode::collectives::cuda
