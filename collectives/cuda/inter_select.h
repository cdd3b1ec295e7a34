// The inter-node transport check run by DeviceGroup::create on several nodes (internal to
// collectives/cuda; the steps are described in inter_select.cc and docs/gpu-collectives.md).
//
// Contract
// - Called on every node, from the thread that runs create(), after the mesh path's DeviceComms
//   (mesh_comms) exist and passed their check; runs one thread per local rank (runLocalRanks)
//   and returns after all joined.
// - Every rank of every node takes part with its host Communicator and makes the same host
//   collectives in the same order; the decision is the same on every rank.
// - NCCL failures never throw out of it: they become the decision's reason (and the failing
//   rank's detail); a host Communicator failure (peer lost) throws as usual.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/cuda/device_comm.h"
#include "collectives/cuda/inter_transport.h"
#include "collectives/cuda/nccl_global_op.h"

namespace tpnode::collectives::cuda {

struct InterSelection {
  InterDecision decision;
  // Per local rank: the NCCL communicator when decision.chosen is kNccl, else null.
  std::vector<std::shared_ptr<NcclGlobal>> globals;
  // Per local rank: the local failure's text ("" when none), for the log.
  std::vector<std::string> details;
};

InterSelection selectInter(std::vector<std::unique_ptr<DeviceComm>>& mesh_comms,
                           const std::vector<Communicator*>& host_comms,
                           const std::vector<int>& devices, const InterOptions& options,
                           size_t max_count, size_t probe_count);

// Runs fn(r) on one thread per local rank with devices[r] current (device_group.cc). When a
// thread throws, on_error(what) releases the others; the first exception is rethrown after all
// joined.
void runLocalRanks(const std::vector<int>& devices, const std::function<void(int)>& fn,
                   const std::function<void(const std::string&)>& on_error);

}  // namespace tpnode::collectives::cuda
