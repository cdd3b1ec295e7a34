// P2pOp: the GPU ranks' all-reduce by peer copies and the add kernel (a DeviceLocalOp,
// device_local_op.h), its shared state and its startup checks.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "collectives/cuda/cuda_resources.h"
#include "collectives/cuda/device_local_op.h"
#include "collectives/spin_barrier.h"

namespace tpnode::collectives::cuda {

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

}  // namespace tpnode::collectives::cuda
