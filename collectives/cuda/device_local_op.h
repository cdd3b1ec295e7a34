// DeviceLocalOp: one step of the GPU all-reduce (internal to collectives/cuda). GPU ranks
// all-reduce in the same composition as CPU ranks (docs/collectives.md, "One composition"): a
// local op among the node's ranks, then an inter-node op, then the result on every local rank.
// DeviceLocalOp is the device-memory counterpart of collectives::LocalOp
// (collectives/local_op.h), reduced to the one operation GPU ranks need, an all-reduce ordered
// on a stream. Its implementations, one header each:
//   local ops (the GPU transports):  NcclOp (nccl_op.h), P2pOp (peer copies + add kernel,
//                                    p2p_op.h), HostStagingOp (through pinned host memory into
//                                    the rank's host Communicator, host_staging_op.h; that is
//                                    the hierarchical CPU all-reduce, so on several nodes it
//                                    does the inter-node op too);
//   inter-node ops:                  HostStagingOp with only local rank 0 contributing (the node
//                                    sum into the hierarchical host Communicator over the mesh),
//                                    NcclGlobalOp (one NCCL communicator over every GPU rank of
//                                    every node, nccl_global_op.h: the whole composition at once).
// makeDeviceHierarchical (device_hierarchical.h) composes them into the DeviceComm of a rank;
// every self-test of them verifies by reduction (device_verify.h).
//
// Contract
// - One op object per local rank, used only by that rank's thread with its device current.
// - allReduceSum(data, count, stream): every rank of the op's group calls it with the same
//   count, in the same order; count <= the max_count the op was built for. On return the
//   result is ordered on `stream` (it may not be in `data` yet).
// - abort(reason): releases the other local ranks of the group if they are blocked in a
//   host-side wait of this op (called when this rank's allReduceSum threw). Sticky.
// - Shared resources (peer inboxes, NCCL communicators) live in a shared state object that
//   every op of the group holds; the last holder frees them after the GPU work that uses
//   them has finished.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

namespace tpnode::collectives::cuda {

class DeviceLocalOp {
 public:
  virtual ~DeviceLocalOp() = default;
  virtual void allReduceSum(float* data, size_t count, cudaStream_t stream) = 0;
  // Whether allReduceSum may be recorded into a CUDA graph (it never waits on the host).
  virtual bool capturable() const = 0;
  virtual void abort(const std::string& reason) { (void)reason; }
};

}  // namespace tpnode::collectives::cuda
