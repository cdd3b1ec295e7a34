// LocalGroup: N CPU ranks that are threads of one process and share memory.
//
// Usage (the model layer):
//   auto group = collectives::LocalGroup::create(tp);        // once, on any thread
//   // in rank thread r:
//   std::unique_ptr<Communicator> comm = group->communicator(r);
//   comm->allReduceSum(buf, n, DType::kF32);
//
// Contract
// - create() allocates everything the group ever needs; no collective allocates.
// - communicator(r) / localOp(r): call once per rank (any thread), then use the object only on
//   rank r's thread. Each returned object keeps the group alive (shared ownership).
// - Data path: each rank publishes the address of its own buffer; ranks read each other's
//   buffers directly (no copy through the kernel, no staging buffer). all-reduce: every rank
//   sums its cache-line-aligned slice over all ranks in rank order 0..N-1 (f32 accumulation,
//   one rounding), then copies the other slices from their owners. Bit-identical on all ranks
//   and across reruns. Three barrier phases per all-reduce, two per all-gather / broadcast.
// - Synchronization: SpinBarrier (spin on atomics up to options.spin, then futex sleep).
// - Failure: abort(code, reason), from any thread, releases every rank blocked in the group
//   and makes every later call throw Error(code, reason). A rank whose collective throws for
//   another reason (a mesh error in the hierarchical all-reduce) aborts the group itself.
//   A collective that throws returns only once no other rank can still read the caller's
//   buffer (LocalOp::endOp), so the caller may free it.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/local_op.h"
#include "collectives/options.h"
#include "collectives/spin_barrier.h"

namespace tpnode::collectives {

class LocalGroup : public std::enable_shared_from_this<LocalGroup> {
 public:
  // `ranks` >= 1. Options default to CollectiveOptions::fromEnv().
  static std::shared_ptr<LocalGroup> create(int ranks);
  static std::shared_ptr<LocalGroup> create(int ranks, const CollectiveOptions& options);

  int size() const { return static_cast<int>(slots_.size()); }

  // The single-node Communicator of rank r (global rank = r, size = ranks).
  std::unique_ptr<Communicator> communicator(int rank);
  // The LocalOp of rank r, for composing with an inter-node exchange.
  std::unique_ptr<LocalOp> localOp(int rank);

  void abort(ErrorCode code, const std::string& reason) { barrier_.abort(code, reason); }
  bool aborted() const { return barrier_.aborted(); }

  // Ranks inside a collective (LocalOp::beginOp/endOp).
  std::atomic<int>& inside() { return inside_; }

  // What a rank publishes for the current operation. Written by its owner before a barrier,
  // read by the others after it (the barrier orders the accesses).
  enum class OpKind : uint8_t { kAllReduce, kAllGather, kBroadcast };
  struct alignas(64) Slot {
    const void* in = nullptr;
    void* out = nullptr;
    size_t count = 0;
    DType dtype = DType::kF32;
    OpKind op = OpKind::kAllReduce;
    int root = 0;
  };

  // For the CPU LocalOp implementation (local_group.cc).
  Slot& slot(int rank) { return slots_[static_cast<size_t>(rank)]; }
  SpinBarrier& barrier() { return barrier_; }

  LocalGroup(int ranks, const CollectiveOptions& options);  // use create()

 private:
  std::vector<Slot> slots_;
  SpinBarrier barrier_;
  alignas(64) std::atomic<int> inside_{0};
};

}  // namespace tpnode::collectives
