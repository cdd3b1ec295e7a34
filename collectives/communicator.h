// Communicator: the collective operations the model calls, for one rank of the global
// tensor-parallel group (all ranks of all nodes). Global rank = node_id * local_tp + local_rank.
//
// Contract
// - One Communicator object per rank; each is used by exactly one thread (the rank's thread).
//   All ranks of the group must call the same collectives in the same order with the same
//   count and dtype.
// - Buffers are contiguous host memory owned by the caller (GPU ranks all-reduce device memory
//   through cuda::DeviceComm, collectives/cuda/device_comm.h, built in the same composition:
//   docs/collectives.md, "One composition"). Calls are blocking: on return the result is in the
//   buffer and the buffer may be reused.
// - Determinism: the summation order is fixed and documented, so every rank holds bit-identical
//   results and a rerun gives the same bits.
// - Failure: if a peer dies, every surviving rank's call throws Error(kPeerLost) within the
//   liveness timeout; nothing hangs forever.
//
// Implementations
// - SoloCommunicator (below): the group of one.
// - LocalGroup::communicator(r) (collectives/local_group.h): CPU ranks that are threads of one
//   process:  auto group = LocalGroup::create(tp);  auto comm = group->communicator(r);
// - Hierarchical (collectives/hierarchical.h): local group x nodes over the mesh.
// The summation order of each is documented in docs/collectives.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tpnode::collectives {

enum class DType : uint8_t { kF32 = 0, kF16 = 1, kBF16 = 2 };

size_t dtypeSize(DType dtype);
std::string_view dtypeName(DType dtype);

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;  // global rank
  virtual int size() const = 0;  // global group size

  // In place: data[i] = sum over ranks of data[i].
  virtual void allReduceSum(void* data, size_t count, DType dtype) = 0;
  // out = concat over ranks (in rank order) of each rank's `count` elements of `in`.
  // `out` holds size() * count elements.
  virtual void allGather(const void* in, void* out, size_t count, DType dtype) = 0;
  // data on `root` is copied to every rank.
  virtual void broadcast(void* data, size_t count, DType dtype, int root) = 0;
  // out on `root` = concat over ranks (in rank order) of each rank's `count` elements of `in`,
  // as allGather, but only `root` needs the result: `out` holds size() * count elements on
  // every rank (implementations may use it as scratch) and is defined only on `root` on
  // return. Every rank must call it. The default is allGather; the hierarchical group sends
  // each node's block to root's node alone (half the network bytes of an all-gather for 2
  // nodes, and no broadcast back).
  virtual void gather(const void* in, void* out, size_t count, DType dtype, int root) {
    (void)root;
    allGather(in, out, count, dtype);
  }
  virtual void barrier() = 0;
};

// The group of one: every collective is a no-op. For tp=1 runs and unit tests.
class SoloCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void allReduceSum(void*, size_t, DType) override {}
  void allGather(const void* in, void* out, size_t count, DType dtype) override;
  void broadcast(void*, size_t, DType, int) override {}
  void barrier() override {}
};

}  // namespace tpnode::collectives
