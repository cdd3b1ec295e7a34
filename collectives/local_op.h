// LocalOp: the collectives among the ranks of ONE process (one node), for one rank, on host
// memory: CPU ranks as threads sharing memory (LocalGroup, collectives/local_group.h). The
// all-reduce is one composition for CPU and GPU ranks (docs/collectives.md, "One composition"):
// a local op, an inter-node op, the result on every local rank. The hierarchical communicator
// (collectives/hierarchical.h) composes a LocalOp with the inter-node exchange (InterNode) and
// knows nothing of how the local ranks talk. GPU ranks plug their transports (NCCL, CUDA
// peer-to-peer + add kernel, host staging) into the same composition as device local ops
// (cuda::DeviceLocalOp, collectives/cuda/device_local_op.h), which do the all-reduce step only.
//
// Contract
// - One LocalOp per local rank, used only by that rank's thread. All local ranks call the same
//   operations in the same order with the same count and dtype (a mismatch found by the
//   implementation throws Error(kInvalidArgument) on every rank).
// - Buffers belong to the caller and live in the memory kind of the implementation (host for
//   CPU ranks, device for CUDA ranks). Every call blocks until its result is in place.
// - The sliced all-reduce is split in two phases so that the caller can work on its own slice
//   in between (the inter-node exchange of the hierarchical all-reduce):
//     reduceScatter(d):   on return d[ownSlice] = local sum of every rank's d[ownSlice]; the
//                         rest of d must not be written until allGatherSlices(d) returns.
//     allGatherSlices(d): on return every rank's d holds every rank's own slice.
//   Local sums add the ranks in local-rank order 0, 1, ..., accumulating in f32 and rounding to
//   the dtype once (collectives/reduce.h).
// - abort() may be called from any thread; every rank blocked in, or later calling, an
//   operation of the group throws Error(code, reason).
#pragma once

#include <cstddef>
#include <string>

#include "collectives/communicator.h"
#include "collectives/slicing.h"
#include "common/error.h"

namespace tpnode::collectives {

class LocalOp {
 public:
  virtual ~LocalOp() = default;

  virtual int localRank() const = 0;
  virtual int localSize() const = 0;

  // The slice of `count` elements this rank owns in reduceScatter/allGatherSlices.
  Range ownSlice(size_t count, DType dtype) const { return sliceOf(count, dtype, localRank()); }
  Range sliceOf(size_t count, DType dtype, int local_rank) const {
    return sliceRange(count, localSize(), local_rank, cacheLineElems(dtypeSize(dtype)));
  }

  virtual void reduceScatter(void* data, size_t count, DType dtype) = 0;
  virtual void allGatherSlices(void* data, size_t count, DType dtype) = 0;
  // reduceScatter + allGatherSlices.
  virtual void allReduceSum(void* data, size_t count, DType dtype) = 0;
  // out (localSize() * count elements) = concat over local ranks of each rank's `in`.
  virtual void allGather(const void* in, void* out, size_t count, DType dtype) = 0;
  virtual void broadcast(void* data, size_t count, DType dtype, int root) = 0;
  virtual void barrier() = 0;

  // Brackets one collective of the caller (which may span several calls above, e.g. the
  // hierarchical all-reduce). beginOp() throws at once if the group was aborted. After a
  // failure, endOp(true) returns only once no rank of the group is inside a collective any
  // more (they all fail too: the group is aborted), so nobody still reads the caller's buffer
  // and the caller may free it. After success, endOp(false) returns at once.
  virtual void beginOp() = 0;
  virtual void endOp(bool failed) = 0;

  virtual void abort(ErrorCode code, const std::string& reason) = 0;
};

}  // namespace tpnode::collectives
