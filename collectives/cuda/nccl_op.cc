// NcclOp (nccl_op.h): one NCCL communicator per local rank (ncclCommInitAll).
#include "collectives/cuda/nccl_op.h"

#include <atomic>
#include <set>

#include <fmt/format.h>

#include "collectives/cuda/cuda_resources.h"
#include "common/check.h"

#ifdef TPNODE_HAVE_NCCL
#include "collectives/cuda/nccl_check.h"
#endif

namespace tpnode::collectives::cuda {

std::string ncclUnavailable(const std::vector<int>& devices) {
#ifndef TPNODE_HAVE_NCCL
  (void)devices;
  return "this build has no NCCL (nccl.h / libnccl not found at configure time)";
#else
  const std::set<int> distinct(devices.begin(), devices.end());
  if (distinct.size() == devices.size()) return {};
  std::string list;
  for (size_t r = 0; r < devices.size(); ++r) {
    list += (r ? "," : "") + std::to_string(devices[r]);
  }
  int repeated = -1;
  std::set<int> seen;
  for (int d : devices) {
    if (!seen.insert(d).second) {
      repeated = d;
      break;
    }
  }
  return fmt::format(
      "nccl needs one device per local rank; devices {} repeat device {}: use "
      "--local-transport p2p or host",
      list, repeated);
#endif
}

#ifdef TPNODE_HAVE_NCCL

// One communicator per local rank, created together (ncclCommInitAll) and destroyed together.
struct NcclShared {
  std::vector<int> devices;
  std::vector<ncclComm_t> comms;
  std::atomic<bool> broken{false};  // a call failed or timed out: abort instead of destroy

  ~NcclShared() {
    for (size_t r = 0; r < comms.size(); ++r) {
      if (comms[r] == nullptr) continue;
      int previous = 0;
      (void)cudaGetDevice(&previous);
      (void)cudaSetDevice(devices[r]);
      if (broken.load()) {
        (void)ncclCommAbort(comms[r]);
      } else {
        (void)ncclCommDestroy(comms[r]);
      }
      (void)cudaSetDevice(previous);
    }
  }
};

namespace {

class NcclOp final : public DeviceLocalOp {
 public:
  NcclOp(std::shared_ptr<NcclShared> shared, int rank)
      : shared_(std::move(shared)), comm_(shared_->comms[static_cast<size_t>(rank)]) {}
  void allReduceSum(float* data, size_t count, cudaStream_t stream) override {
    try {
      TP_NCCL(ncclAllReduce(data, data, count, ncclFloat, ncclSum, comm_, stream));
    } catch (...) {
      shared_->broken = true;
      throw;
    }
  }
  bool capturable() const override { return true; }
  void abort(const std::string&) override { shared_->broken = true; }

 private:
  std::shared_ptr<NcclShared> shared_;
  ncclComm_t const comm_;
};

}  // namespace

std::shared_ptr<NcclShared> createNcclShared(const std::vector<int>& devices) {
  auto shared = std::make_shared<NcclShared>();
  shared->devices = devices;
  shared->comms.assign(devices.size(), nullptr);
  int previous = 0;
  TP_CUDA(cudaGetDevice(&previous));
  const ncclResult_t res =
      ncclCommInitAll(shared->comms.data(), static_cast<int>(devices.size()), devices.data());
  (void)cudaSetDevice(previous);
  if (res != ncclSuccess) {
    shared->comms.assign(devices.size(), nullptr);
    ncclFail(res, "ncclCommInitAll", __FILE__, __LINE__);
  }
  return shared;
}

std::unique_ptr<DeviceLocalOp> createNcclOp(std::shared_ptr<NcclShared> shared, int rank) {
  return std::make_unique<NcclOp>(std::move(shared), rank);
}

#else

struct NcclShared {};

std::shared_ptr<NcclShared> createNcclShared(const std::vector<int>& devices) {
  fail(ErrorCode::kUnsupported, "nccl transport unavailable: {}", ncclUnavailable(devices));
}

std::unique_ptr<DeviceLocalOp> createNcclOp(std::shared_ptr<NcclShared>, int) {
  fail(ErrorCode::kUnsupported, "nccl transport unavailable: this build has no NCCL");
}

#endif

}  // namespace tpnode::collectives::cuda
