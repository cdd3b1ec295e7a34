// The ops of the GPU all-reduce (internal to collectives/cuda). GPU ranks all-reduce in the same
// composition as CPU ranks (docs/collectives.md, "One composition"): a local op among the
// node's ranks, then an inter-node op, then the result on every local rank. DeviceLocalOp is the
// device-memory counterpart of collectives::LocalOp (collectives/local_op.h), reduced to the one
// operation GPU ranks need, an all-reduce ordered on a stream. Its implementations:
//   local ops (the GPU transports):  NcclOp (nccl_stage.cc), P2pOp (peer copies + add kernel,
//                                    p2p_stage.cc), HostStagingOp (through pinned host memory
//                                    into the rank's host Communicator, host_stage.cc; that is
//                                    the hierarchical CPU all-reduce, so on several nodes it
//                                    does the inter-node op too);
//   inter-node ops:                  HostStagingOp with only local rank 0 contributing (the node
//                                    sum into the hierarchical host Communicator over the mesh),
//                                    NcclGlobalOp (one NCCL communicator over every GPU rank of
//                                    every node, nccl_global.cc: the whole composition at once).
// makeDeviceHierarchical (device_hierarchical.cc) composes them into the DeviceComm of a rank.
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

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/cuda/cuda_resources.h"
#include "collectives/cuda/device_comm.h"
#include "collectives/spin_barrier.h"
#include "collectives/verify.h"

namespace tpnode::collectives::cuda {

class DeviceLocalOp {
 public:
  virtual ~DeviceLocalOp() = default;
  virtual void allReduceSum(float* data, size_t count, cudaStream_t stream) = 0;
  // Whether allReduceSum may be recorded into a CUDA graph (it never waits on the host).
  virtual bool capturable() const = 0;
  virtual void abort(const std::string& reason) { (void)reason; }
};

// The DeviceComm of a GPU rank (device_hierarchical.cc): `local` (step 1), then `inter` when
// not null (steps 2 and 3: null on one node, or when `local` is the whole composition). Checks
// count against max_count; a failure aborts `local` (releasing the other local ranks).
std::unique_ptr<DeviceComm> makeDeviceHierarchical(int rank, int size, Transport transport,
                                                   size_t max_count,
                                                   std::unique_ptr<DeviceLocalOp> local,
                                                   std::unique_ptr<DeviceLocalOp> inter);

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

// Peer-to-peer: the persistent inboxes of the local ranks (one per rank, on its device), the
// events that order the ranks' streams, and the host barrier of the rank threads.
struct P2pShared {
  P2pShared(const std::vector<int>& devices, size_t max_count);
  ~P2pShared();
  P2pShared(const P2pShared&) = delete;
  P2pShared& operator=(const P2pShared&) = delete;

  int ranks() const { return static_cast<int>(devices.size()); }

  const std::vector<int> devices;
  SpinBarrier barrier;
  std::vector<DeviceBuffer> inbox;  // inbox[r]: written by rank r, read by every rank
  std::vector<Event> copied;        // copied[r]: rank r's data is in inbox[r]
  std::vector<Event> summed;        // summed[r]: rank r has finished reading the inboxes
  // counts[r]: the count of rank r's current call, written before the first barrier and read
  // after it (every rank checks that all called with the same count).
  std::vector<size_t> counts;
};

// Each rank copies its data into its inbox; barrier; each rank waits for the others' copies
// and sums all inboxes in rank order into its data (one kernel reading peer memory); barrier;
// each rank's stream waits until every rank has finished reading (inboxes reusable).
class P2pOp final : public DeviceLocalOp {
 public:
  P2pOp(std::shared_ptr<P2pShared> shared, int rank) : shared_(std::move(shared)), rank_(rank) {}
  void allReduceSum(float* data, size_t count, cudaStream_t stream) override;
  bool capturable() const override { return false; }
  void abort(const std::string& reason) override;

 private:
  std::shared_ptr<P2pShared> shared_;
  const int rank_;
};

// Startup check of every ordered pair (rank <- peer): each rank fills its inbox with a known
// pattern, then reads every peer's inbox with the add kernel and compares. Called by every
// local rank thread at once; returns this rank's failures ("p2p 0<-1 (device 0<-1): ...").
std::vector<std::string> p2pPairCheck(P2pShared& shared, int rank, cudaStream_t stream,
                                      size_t count);

// Why the peer transport cannot run on these devices ("" when it can). Enables peer access
// for every pair of distinct devices that reports it (from the calling thread).
std::string prepareP2p(const std::vector<int>& devices);

// NCCL over the local devices (one communicator per local rank, ncclCommInitAll). Without
// NCCL in the build, ncclUnavailable() says so and createNcclOp throws.
struct NcclShared;
std::string ncclUnavailable(const std::vector<int>& devices);  // "" when NCCL can be tried
std::shared_ptr<NcclShared> createNcclShared(const std::vector<int>& devices);
std::unique_ptr<DeviceLocalOp> createNcclOp(std::shared_ptr<NcclShared> shared, int rank);

// NCCL across nodes (nccl_global.cc): one communicator per GPU rank over every GPU rank of
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

// Self-test helpers (device_verify.cc), shared by the local checks and the full-path check
// (device_group.cc) and the inter-node check (inter_select.cc).
using ReduceFn = std::function<void(float* data, size_t count, cudaStream_t stream)>;
// collectives/verify.h through device memory: uploads rank `rank`'s known pattern of `count`
// floats into `buf`, runs `reduce` on `stream`, downloads the result, waits for the stream
// (`what` names it in a timeout) and compares it bit for bit with the sum over `ranks` ranks.
// A wrong value is the result; a CUDA error or a failed reduction throws.
VerifyResult verifyOnDevice(const ReduceFn& reduce, int rank, int ranks, float* buf, size_t count,
                            cudaStream_t stream, const char* what);
// Median time of a reduction over `count` floats of `buf` (5 warm-up calls, 50 timed, each to
// the end of its stream work).
double medianReduceMicros(const ReduceFn& reduce, float* buf, size_t count, cudaStream_t stream);

}  // namespace tpnode::collectives::cuda
