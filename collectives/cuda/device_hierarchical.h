// makeDeviceHierarchical: the DeviceComm of a GPU rank, composed of its device local ops
// (device_local_op.h), the counterpart of collectives::HierarchicalCommunicator.
#pragma once

#include <cstddef>
#include <memory>

#include "collectives/cuda/device_comm.h"
#include "collectives/cuda/device_local_op.h"

namespace tpnode::collectives::cuda {

// The DeviceComm of a GPU rank (device_hierarchical.cc): `local` (step 1), then `inter` when
// not null (steps 2 and 3: null on one node, or when `local` is the whole composition). Checks
// count against max_count; a failure aborts `local` (releasing the other local ranks).
std::unique_ptr<DeviceComm> makeDeviceHierarchical(int rank, int size, Transport transport,
                                                   size_t max_count,
                                                   std::unique_ptr<DeviceLocalOp> local,
                                                   std::unique_ptr<DeviceLocalOp> inter);

}  // namespace tpnode::collectives::cuda
