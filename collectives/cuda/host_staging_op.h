// HostStagingOp: the GPU ranks' all-reduce through pinned host memory into the rank's host
// Communicator (a DeviceLocalOp, device_local_op.h; the host transport, and the inter-node op
// over the mesh after a local GPU reduction).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/cuda/cuda_resources.h"
#include "collectives/cuda/device_local_op.h"

namespace tpnode::collectives::cuda {

// D2H into a pinned buffer, wait, comm->allReduceSum, H2D. With contribute == false the rank
// contributes zeros instead of its data (the inter-node op after a local GPU reduction:
// only local rank 0 brings the node sum; x + 0 is exact, so the result is the same on every
// rank). Not capturable (it waits on the host).
// Messages above kHostChunkThreshold bytes go in chunks (chunkElements; the same cut on every
// rank, since it depends on the count alone), so that the copies of one chunk overlap the host
// all-reduce of another: one host all-reduce per chunk.
class HostStagingOp final : public DeviceLocalOp {
 public:
  static constexpr size_t kHostChunkThreshold = size_t{2} << 20;
  static constexpr size_t kMaxChunks = 16;
  // Elements per chunk for a message of `count` elements (count itself below the threshold).
  static size_t chunkElements(size_t count);

  HostStagingOp(Communicator* comm, int device, size_t max_count, bool contribute);
  void allReduceSum(float* data, size_t count, cudaStream_t stream) override;
  bool capturable() const override { return false; }

 private:
  Communicator* const comm_;  // owned by the caller of DeviceGroup::create; outlives the group
  PinnedBuffer pinned_;
  Event h2d_done_;               // recorded after the last H2D that reads pinned_
  std::vector<Event> d2h_done_;  // d2h_done_[i]: chunk i has landed in pinned_
  const bool contribute_;
};

}  // namespace tpnode::collectives::cuda
