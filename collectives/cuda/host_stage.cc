#include <algorithm>
#include <thread>

#include "collectives/cuda/stages.h"
#include "common/check.h"

namespace tpnode::collectives::cuda {

void waitStream(cudaStream_t stream, const char* what, std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  for (int spins = 0;; ++spins) {
    const cudaError_t err = cudaStreamQuery(stream);
    if (err == cudaSuccess) return;
    if (err != cudaErrorNotReady) cudaFail(err, "cudaStreamQuery", __FILE__, __LINE__);
    (void)cudaGetLastError();  // "not ready" is no error: keep it out of the next check
    if (spins >= 1000) {
      if (std::chrono::steady_clock::now() - start > timeout) {
        fail(ErrorCode::kTimeout, "[coll] {} did not finish within {} ms", what, timeout.count());
      }
      std::this_thread::yield();
    }
  }
}

HostStage::HostStage(Communicator* comm, int device, size_t max_count, bool contribute)
    : comm_(comm), pinned_(max_count), h2d_done_(device), contribute_(contribute) {}

void HostStage::reduce(float* data, size_t count, cudaStream_t stream) {
  TP_CHECK(count <= pinned_.count(), "host stage: {} elements, buffer holds {}", count,
           pinned_.count());
  const size_t bytes = count * sizeof(float);
  // The previous call's H2D (possibly on another stream) must be done reading pinned_.
  TP_CUDA(cudaStreamWaitEvent(stream, h2d_done_.get(), 0));
  if (contribute_) {
    TP_CUDA(cudaMemcpyAsync(pinned_.get(), data, bytes, cudaMemcpyDeviceToHost, stream));
  }
  waitStream(stream, "device-to-host copy");
  if (!contribute_) std::fill_n(pinned_.get(), count, 0.0f);
  comm_->allReduceSum(pinned_.get(), count, DType::kF32);
  TP_CUDA(cudaMemcpyAsync(data, pinned_.get(), bytes, cudaMemcpyHostToDevice, stream));
  TP_CUDA(cudaEventRecord(h2d_done_.get(), stream));
}

}  // namespace tpnode::collectives::cuda
