// The add kernel for the emulated runtime: the same order as sum_kernel.cu, on the stream's
// worker thread.
#include "collectives/cuda/sum_kernel.h"

#include <atomic>

namespace {
std::atomic<size_t> corrupt_from{0};  // fakeCorruptSumsFrom
}  // namespace

void fakeCorruptSumsFrom(size_t min_count) {
  corrupt_from = min_count;
}

namespace tpnode::collectives::cuda {
cudaError_t launchSum(float* out, const SumSources& sources, size_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (sources.count < 1 || sources.count > kMaxSumSources) return cudaErrorInvalidValue;
  if (!fakeKernelCanRead(out)) return cudaErrorInvalidValue;
  for (int s = 0; s < sources.count; ++s) {
    if (!fakeKernelCanRead(sources.src[s])) return cudaErrorInvalidValue;  // no peer access
  }
  const size_t from = corrupt_from.load();
  const bool corrupt = from > 0 && count >= from;
  return fakeEnqueue(stream, [out, sources, count, corrupt] {
    for (size_t i = 0; i < count; ++i) {
      float acc = sources.src[0][i];
      for (int s = 1; s < sources.count; ++s) acc += sources.src[s][i];
      out[i] = acc;
    }
    if (corrupt) out[count - 1] += 1.0f;
  });
}
}  // namespace tpnode::collectives::cuda
