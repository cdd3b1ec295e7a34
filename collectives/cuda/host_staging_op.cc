// HostStagingOp (host_staging_op.h): the device all-reduce through pinned host memory.
#include "collectives/cuda/host_staging_op.h"

#include <algorithm>

#include "common/check.h"

namespace tpnode::collectives::cuda {

size_t HostStagingOp::chunkElements(size_t count) {
  if (count * sizeof(float) <= kHostChunkThreshold) return count;
  const size_t min_chunk = (size_t{1} << 20) / sizeof(float);  // 1 MiB
  size_t chunk = std::max(min_chunk, (count + kMaxChunks - 1) / kMaxChunks);
  return (chunk + 15) / 16 * 16;
}

HostStagingOp::HostStagingOp(Communicator* comm, int device, size_t max_count, bool contribute)
    : comm_(comm), pinned_(max_count), h2d_done_(device), contribute_(contribute) {
  for (size_t i = 0; i < kMaxChunks; ++i) d2h_done_.emplace_back(device);
}

void HostStagingOp::allReduceSum(float* data, size_t count, cudaStream_t stream) {
  TP_CHECK(count <= pinned_.count(), "HostStagingOp: {} elements, buffer holds {}", count,
           pinned_.count());
  const size_t chunk = chunkElements(count);
  const size_t chunks = (count + chunk - 1) / chunk;
  TP_CHECK(chunks <= kMaxChunks, "HostStagingOp: {} chunks", chunks);
  float* const pinned = pinned_.get();
  // The previous call's H2D (possibly on another stream) must be done reading pinned_.
  TP_CUDA(cudaStreamWaitEvent(stream, h2d_done_.get(), 0));
  if (contribute_) {
    for (size_t c = 0; c < chunks; ++c) {
      const size_t off = c * chunk, n = std::min(chunk, count - off);
      TP_CUDA(cudaMemcpyAsync(pinned + off, data + off, n * sizeof(float), cudaMemcpyDeviceToHost,
                              stream));
      TP_CUDA(cudaEventRecord(d2h_done_[c].get(), stream));
    }
  } else {
    waitStream(stream, "inter-node op");  // the previous H2D has finished reading pinned_
    std::fill_n(pinned, count, 0.0f);
  }
  for (size_t c = 0; c < chunks; ++c) {
    const size_t off = c * chunk, n = std::min(chunk, count - off);
    if (contribute_) waitEvent(d2h_done_[c].get(), "device-to-host copy");
    comm_->allReduceSum(pinned + off, n, DType::kF32);
    TP_CUDA(cudaMemcpyAsync(data + off, pinned + off, n * sizeof(float), cudaMemcpyHostToDevice,
                            stream));
  }
  TP_CUDA(cudaEventRecord(h2d_done_.get(), stream));
}

}  // namespace tpnode::collectives::cuda
