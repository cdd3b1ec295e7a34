// NcclOp: the GPU ranks' all-reduce inside the node with NCCL (a DeviceLocalOp,
// device_local_op.h; nccl_op.cc).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "collectives/cuda/device_local_op.h"

namespace tpnode::collectives::cuda {

// Over the local devices (one communicator per local rank, ncclCommInitAll). Without
// NCCL in the build, ncclUnavailable() says so and createNcclOp throws.
struct NcclShared;
std::string ncclUnavailable(const std::vector<int>& devices);  // "" when NCCL can be tried
std::shared_ptr<NcclShared> createNcclShared(const std::vector<int>& devices);
std::unique_ptr<DeviceLocalOp> createNcclOp(std::shared_ptr<NcclShared> shared, int rank);

}  // namespace tpnode::collectives::cuda
