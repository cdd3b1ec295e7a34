// GpuNode with CUDA: the device all-reduce group and CudaRank construction with the memory
// probe.
#include "model/cuda/gpu_node.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <mutex>

#include "collectives/cuda/device_comm.h"
#include "common/cuda_check.h"
#include "common/error.h"
#include "model/cuda/cuda_rank.h"

namespace tpnode::model {

bool gpuBackendBuilt() {
  return true;
}

int visibleCudaDevices(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (why != nullptr) {
      *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err) + " (" +
             cudaGetErrorName(err) + ")";
    }
    (void)cudaGetLastError();  // clear the sticky error for later calls
    return 0;
  }
  if (count == 0 && why != nullptr) *why = "the CUDA driver reports no device";
  return count;
}

namespace {

class CudaGpuNode final : public GpuNode {
 public:
  CudaGpuNode(std::vector<collectives::Communicator*> host_comms, const GpuNodeOptions& options)
      : host_comms_(std::move(host_comms)), options_(options) {
    const collectives::cuda::Transport t =
        collectives::cuda::parseTransport(options_.transport, "--local-transport");
    // At least 256 KiB per call, so the transports' 16 KiB self-test always fits.
    options_.max_allreduce_floats = std::max<size_t>(options_.max_allreduce_floats, 1 << 16);
    collectives::cuda::InterOptions inter;
    inter.requested =
        collectives::cuda::parseInterTransport(options_.inter_transport, "--inter-transport");
    group_ = collectives::cuda::DeviceGroup::create(host_comms_, options_.devices, t,
                                                    options_.max_allreduce_floats, 16 << 10, inter);
    const auto& rep = group_->report();
    spdlog::info("[gpu] device all-reduce: {}", transportSummary());
    for (const std::string& d : rep.demoted) spdlog::warn("[gpu] demoted: {}", d);
    for (size_t r = 0; r < host_comms_.size(); ++r)
      comms_.push_back(group_->communicator(static_cast<int>(r)));
  }

  std::unique_ptr<RankModel> makeRank(int r, const ModelConfig& config, RankWeights weights,
                                      int64_t n_slots, int64_t n_ctx, int64_t kv_block_size,
                                      int64_t kv_blocks) override {
    std::lock_guard lock(mu_);
    const int device = options_.devices.at(static_cast<size_t>(r));
    TP_CUDA(cudaSetDevice(device));
    size_t free_before = 0, total = 0, free_after = 0;
    TP_CUDA(cudaMemGetInfo(&free_before, &total));
    cuda::CudaRankOptions o;
    o.device = device;
    o.n_slots = n_slots;
    o.n_ctx = n_ctx;
    o.kv_block_size = kv_block_size;
    o.kv_blocks = kv_blocks;
    o.graphs = options_.graphs;
    o.max_allreduce_floats = options_.max_allreduce_floats;
    collectives::cuda::DeviceComm* dc = comms_.at(static_cast<size_t>(r)).get();
    auto rank = std::make_unique<cuda::CudaRank>(config, std::move(weights),
                                                 *host_comms_.at(static_cast<size_t>(r)), dc, o);
    TP_CUDA(cudaMemGetInfo(&free_after, &total));
    spdlog::info(
        "[gpu] local rank {} on cuda:{}: {:.1f} MiB on the device ({:.1f} MiB KV cache); device "
        "free {:.0f} -> {:.0f} MiB of {:.0f} MiB",
        r, device, rank->deviceBytes() / 1048576.0, rank->kvBytes() / 1048576.0,
        free_before / 1048576.0, free_after / 1048576.0, total / 1048576.0);
    return rank;
  }

  std::string transportSummary() const override {
    const auto& rep = group_->report();
    const std::string local =
        std::string(collectives::cuda::transportName(rep.chosen)) + " (" + rep.reason + ")";
    if (rep.inter == collectives::cuda::InterTransport::kNccl) {
      return "one NCCL communicator across nodes; inter-node: nccl (" + rep.inter_reason +
             "); the local transport " + local + " is not used";
    }
    return local +
           "; inter-node: " + std::string(collectives::cuda::interTransportName(rep.inter)) + " (" +
           rep.inter_reason + ")";
  }
  std::string transportName() const override {
    return std::string(collectives::cuda::transportName(group_->report().chosen));
  }

 private:
  std::vector<collectives::Communicator*> host_comms_;
  GpuNodeOptions options_;
  std::unique_ptr<collectives::cuda::DeviceGroup> group_;
  std::vector<std::unique_ptr<collectives::cuda::DeviceComm>> comms_;
  std::mutex mu_;
};

}  // namespace

std::unique_ptr<GpuNode> GpuNode::create(std::vector<collectives::Communicator*> host_comms,
                                         const GpuNodeOptions& options) {
  std::string why;
  const int visible = visibleCudaDevices(&why);
  if (visible == 0) {
    fail(ErrorCode::kResource, "--backend cuda: no CUDA device is visible ({}); use --backend cpu",
         why);
  }
  if (options.devices.size() != host_comms.size()) {
    fail(ErrorCode::kInvalidArgument, "{} devices for {} local ranks", options.devices.size(),
         host_comms.size());
  }
  for (int d : options.devices) {
    if (d < 0 || d >= visible) {
      fail(ErrorCode::kResource,
           "CUDA device {} does not exist: {} device(s) are visible (0..{}); check --devices / "
           "TPNODE_TP_DEVICES and CUDA_VISIBLE_DEVICES",
           d, visible, visible - 1);
    }
  }
  return std::make_unique<CudaGpuNode>(std::move(host_comms), options);
}

}  // namespace tpnode::model
