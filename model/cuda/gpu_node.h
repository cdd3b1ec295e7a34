// GpuNode: the GPU ranks of one node — which device each local rank uses, the device
// all-reduce between them (collectives/cuda/device_comm.h) and the factory of their CudaRank
// models. This header needs no CUDA; in a build without CUDA, create() throws
// Error(kUnsupported) and visibleCudaDevices() reports why there are none.
//
// Contract
// - create() runs once per node on one thread, after the host communicators exist (one per
//   local rank, from collectives::NodeGroup::communicator) and before the rank threads start;
//   it runs the transport self-tests (all local ranks take part, on threads of its own).
// - makeRank(r, ...) may be called for each local rank from any thread, one call at a time; it
//   uploads the shard and logs the device memory probe (cudaMemGetInfo before/after).
// - The GpuNode must outlive the ranks it made; the host communicators must outlive it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/rank_model.h"
#include "model/weights.h"

namespace tpnode::model {

// True when this build has the CUDA backend.
bool gpuBackendBuilt();
// CUDA devices visible to this process (0 when none; `why` then says why: no driver, no device,
// built without CUDA, the CUDA error).
int visibleCudaDevices(std::string* why);

struct GpuNodeOptions {
  std::vector<int> devices;        // CUDA device of each local rank (may repeat)
  std::string transport = "auto";  // auto | nccl | p2p | host (--local-transport)
  // auto | mesh | nccl (--inter-transport): across nodes, the TCP mesh or one NCCL communicator
  // over all GPU ranks of all nodes; ignored on one node.
  std::string inter_transport = "auto";
  size_t max_allreduce_floats = 0;  // largest all-reduce the ranks will issue
  bool graphs = true;               // CUDA graphs for decode steps (--cuda-graphs)
};

class GpuNode {
 public:
  static std::unique_ptr<GpuNode> create(std::vector<collectives::Communicator*> host_comms,
                                         const GpuNodeOptions& options);
  virtual ~GpuNode() = default;
  // The KV cache: kv_blocks blocks of kv_block_size positions (0: n_slots full contexts).
  virtual std::unique_ptr<RankModel> makeRank(int local_rank, const ModelConfig& config,
                                              RankWeights weights, int64_t n_slots, int64_t n_ctx,
                                              int64_t kv_block_size = kDefaultKvBlockSize,
                                              int64_t kv_blocks = 0) = 0;
  // "nccl (measured fastest: ...); inter-node: mesh (...)" for the startup log and /metrics.
  virtual std::string transportSummary() const = 0;
  virtual std::string transportName() const = 0;
};

}  // namespace tpnode::model
