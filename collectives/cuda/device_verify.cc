// The device side of verify-by-reduction (collectives/verify.h) and the timing of a reduction,
// used by every self-test of DeviceGroup::create.
#include "collectives/cuda/device_verify.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "collectives/cuda/cuda_resources.h"
#include "common/check.h"

namespace tpnode::collectives::cuda {
namespace {

constexpr int kWarmup = 5;
constexpr int kTimedIterations = 50;

}  // namespace

VerifyResult verifyOnDevice(const ReduceFn& reduce, int rank, int ranks, float* buf, size_t count,
                            cudaStream_t stream, const char* what) {
  return verifyByReduction(rank, ranks, count, [&](std::span<float> host) {
    const size_t bytes = host.size() * sizeof(float);
    TP_CUDA(cudaMemcpyAsync(buf, host.data(), bytes, cudaMemcpyHostToDevice, stream));
    reduce(buf, host.size(), stream);
    TP_CUDA(cudaMemcpyAsync(host.data(), buf, bytes, cudaMemcpyDeviceToHost, stream));
    waitStream(stream, what);
  });
}

double medianReduceMicros(const ReduceFn& reduce, float* buf, size_t count, cudaStream_t stream) {
  TP_CUDA(cudaMemsetAsync(buf, 0, count * sizeof(float), stream));
  std::vector<double> us;
  for (int it = 0; it < kWarmup + kTimedIterations; ++it) {
    const auto t0 = std::chrono::steady_clock::now();
    reduce(buf, count, stream);
    waitStream(stream, "timed all-reduce");
    const auto t1 = std::chrono::steady_clock::now();
    if (it >= kWarmup) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::nth_element(us.begin(), us.begin() + static_cast<std::ptrdiff_t>(us.size() / 2), us.end());
  return us[us.size() / 2];
}

}  // namespace tpnode::collectives::cuda
