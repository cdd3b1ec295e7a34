// NcclGlobalOp: the GPU ranks' all-reduce with one NCCL communicator over every GPU rank of
// every node (a DeviceLocalOp, device_local_op.h, that is the whole composition at once;
// nccl_global_op.cc).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <memory>

#include "collectives/cuda/device_local_op.h"

namespace tpnode::collectives::cuda {

// One communicator per GPU rank over every GPU rank of
// every node; the ncclUniqueId is created by global rank 0 and travels over the host
// Communicator (the mesh). Without NCCL in the build, ncclBuilt() is false and the other
// functions throw Error(kUnsupported).
inline constexpr size_t kNcclIdBytes = 128;
using NcclId = std::array<std::byte, kNcclIdBytes>;
struct NcclGlobal;
bool ncclBuilt();
NcclId ncclGlobalUniqueId();
// ncclCommInitRankConfig with blocking = 0 on the calling thread (with `device` made current),
// then polls ncclCommGetAsyncError until the communicator is ready, at most `timeout`: a peer
// that never joins cannot block this rank forever. On failure or timeout the communicator is
// aborted (ncclCommAbort) and Error is thrown naming the call and NCCL's last error text.
std::shared_ptr<NcclGlobal> initNcclGlobal(const NcclId& id, int nranks, int rank, int device,
                                           std::chrono::milliseconds timeout);
// The op over that communicator: one ncclAllReduce (capturable).
std::unique_ptr<DeviceLocalOp> createNcclGlobalOp(std::shared_ptr<NcclGlobal> global);

}  // namespace tpnode::collectives::cuda
