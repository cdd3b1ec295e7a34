// DeviceHierarchical: the DeviceComm of a GPU rank, the counterpart of hierarchical.cc's
// HierarchicalCommunicator (see the class comment and collectives/cuda/device_local_op.h).
#include "collectives/cuda/device_hierarchical.h"

#include <exception>
#include <utility>

#include "common/check.h"

namespace tpnode::collectives::cuda {
namespace {

// The DeviceComm of one GPU rank: the all-reduce composition of docs/collectives.md ("One
// composition") over device memory. Step 1, the local op, sums the node's GPU ranks on the
// chosen transport (every local rank then holds the node sum). Step 2, the inter-node op (on
// several nodes over the mesh only), sums the node sums: local rank 0 contributes the node sum,
// the others zeros, and the op's host all-reduce hands the result to every local rank, which is
// also step 3 (no separate local broadcast). When one op is the whole composition (the host
// transport: the hierarchical host Communicator; NCCL across nodes) there is no inter-node op.
class DeviceHierarchical final : public DeviceComm {
 public:
  DeviceHierarchical(int rank, int size, Transport transport, size_t max_count,
                     std::unique_ptr<DeviceLocalOp> local, std::unique_ptr<DeviceLocalOp> inter)
      : rank_(rank),
        size_(size),
        transport_(transport),
        max_count_(max_count),
        local_(std::move(local)),
        inter_(std::move(inter)) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Transport transport() const override { return transport_; }
  bool capturable() const override { return local_->capturable() && inter_ == nullptr; }

  void allReduceSum(float* data, size_t count, cudaStream_t stream) override {
    if (count == 0) return;
    if (count > max_count_) {
      fail(ErrorCode::kInvalidArgument,
           "[coll] device all-reduce of {} elements; the group was created for at most {}", count,
           max_count_);
    }
    try {
      local_->allReduceSum(data, count, stream);              // step 1
      if (inter_) inter_->allReduceSum(data, count, stream);  // steps 2 and 3
    } catch (const std::exception& e) {
      local_->abort(e.what());  // release the local ranks waiting for this one
      throw;
    }
  }

 private:
  const int rank_;
  const int size_;
  const Transport transport_;
  const size_t max_count_;
  std::unique_ptr<DeviceLocalOp> local_;
  std::unique_ptr<DeviceLocalOp> inter_;  // null on one node or when local_ does it all
};

}  // namespace

std::unique_ptr<DeviceComm> makeDeviceHierarchical(int rank, int size, Transport transport,
                                                   size_t max_count,
                                                   std::unique_ptr<DeviceLocalOp> local,
                                                   std::unique_ptr<DeviceLocalOp> inter) {
  return std::make_unique<DeviceHierarchical>(rank, size, transport, max_count, std::move(local),
                                              std::move(inter));
}

}  // namespace tpnode::collectives::cuda
