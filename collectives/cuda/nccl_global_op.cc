// NCCL across nodes: one non-blocking communicator per GPU rank over every rank of every node,
// initialised and polled with deadlines so that a failing peer cannot hang the others.
#include "collectives/cuda/nccl_global_op.h"

#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "collectives/cuda/cuda_resources.h"
#include "common/error.h"

#ifdef TPNODE_HAVE_NCCL
#include "collectives/cuda/nccl_check.h"
#endif

namespace tpnode::collectives::cuda {

#ifdef TPNODE_HAVE_NCCL

namespace {

constexpr auto kCallTimeout = std::chrono::seconds(60);     // one all-reduce
constexpr auto kFinalizeTimeout = std::chrono::seconds(5);  // teardown, then abort

std::string lastError(ncclComm_t comm) {
  const char* text = ncclGetLastError(comm);
  return text != nullptr && text[0] != '\0' ? fmt::format(": {}", text) : std::string();
}

// Polls the communicator until it leaves ncclInProgress (a non-blocking communicator's calls
// return before they are done). Error naming `call` on failure, Error(kTimeout) after `timeout`.
void waitReady(ncclComm_t comm, const char* call, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int polls = 0;; ++polls) {
    ncclResult_t state = ncclSuccess;
    TP_NCCL(ncclCommGetAsyncError(comm, &state));
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) {
      fail(state == ncclInvalidUsage || state == ncclInvalidArgument ? ErrorCode::kUnsupported
                                                                     : ErrorCode::kInternal,
           "NCCL call {} failed: {} ({}){}", call, ncclGetErrorString(state),
           static_cast<int>(state), lastError(comm));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      fail(ErrorCode::kTimeout, "NCCL call {} still in progress after {} ms", call,
           timeout.count());
    }
    if (polls < 1000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
}

}  // namespace

struct NcclGlobal {
  int device = 0;
  ncclComm_t comm = nullptr;

  NcclGlobal() = default;
  NcclGlobal(const NcclGlobal&) = delete;
  NcclGlobal& operator=(const NcclGlobal&) = delete;
  // Teardown is local and bounded: ncclCommAbort frees the communicator without the
  // finalize handshake, which could wait for peers (other nodes, or local ranks destroyed later
  // on the same thread) that are already gone. The rank's GPU work has finished by then.
  ~NcclGlobal() {
    if (comm == nullptr) return;
    int previous = 0;
    (void)cudaGetDevice(&previous);
    (void)cudaSetDevice(device);
    (void)ncclCommAbort(comm);
    (void)cudaSetDevice(previous);
  }
};

namespace {

class NcclGlobalOp final : public DeviceLocalOp {
 public:
  explicit NcclGlobalOp(std::shared_ptr<NcclGlobal> global) : global_(std::move(global)) {}
  void allReduceSum(float* data, size_t count, cudaStream_t stream) override {
    const ncclResult_t res =
        ncclAllReduce(data, data, count, ncclFloat, ncclSum, global_->comm, stream);
    if (res == ncclInProgress) {
      waitReady(global_->comm, "ncclAllReduce", kCallTimeout);
    } else if (res != ncclSuccess) {
      ncclFail(res, "ncclAllReduce (inter-node)", __FILE__, __LINE__);
    }
  }
  bool capturable() const override { return true; }

 private:
  std::shared_ptr<NcclGlobal> global_;
};

}  // namespace

bool ncclBuilt() {
  return true;
}

NcclId ncclGlobalUniqueId() {
  ncclUniqueId uid;
  static_assert(sizeof(uid) == kNcclIdBytes);
  TP_NCCL(ncclGetUniqueId(&uid));
  NcclId id;
  std::memcpy(id.data(), &uid, sizeof(uid));
  return id;
}

std::shared_ptr<NcclGlobal> initNcclGlobal(const NcclId& id, int nranks, int rank, int device,
                                           std::chrono::milliseconds timeout) {
  auto global = std::make_shared<NcclGlobal>();
  global->device = device;
  ncclUniqueId uid;
  std::memcpy(&uid, id.data(), sizeof(uid));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  TP_CUDA(cudaSetDevice(device));
  const ncclResult_t res = ncclCommInitRankConfig(&global->comm, nranks, uid, rank, &config);
  // On any failure below, `global`'s destructor aborts what was created.
  if (res != ncclSuccess && res != ncclInProgress) {
    fail(res == ncclInvalidUsage || res == ncclInvalidArgument ? ErrorCode::kUnsupported
                                                               : ErrorCode::kInternal,
         "NCCL call ncclCommInitRankConfig failed: {} ({}){}", ncclGetErrorString(res),
         static_cast<int>(res), lastError(global->comm));
  }
  if (global->comm == nullptr) {
    fail(ErrorCode::kInternal, "ncclCommInitRankConfig returned no communicator");
  }
  waitReady(global->comm, "ncclCommInitRankConfig", timeout);
  return global;
}

std::unique_ptr<DeviceLocalOp> createNcclGlobalOp(std::shared_ptr<NcclGlobal> global) {
  return std::make_unique<NcclGlobalOp>(std::move(global));
}

#else

struct NcclGlobal {};

bool ncclBuilt() {
  return false;
}

NcclId ncclGlobalUniqueId() {
  fail(ErrorCode::kUnsupported, "nccl across nodes unavailable: this build has no NCCL");
}

std::shared_ptr<NcclGlobal> initNcclGlobal(const NcclId&, int, int, int,
                                           std::chrono::milliseconds) {
  fail(ErrorCode::kUnsupported, "nccl across nodes unavailable: this build has no NCCL");
}

std::unique_ptr<DeviceLocalOp> createNcclGlobalOp(std::shared_ptr<NcclGlobal>) {
  fail(ErrorCode::kUnsupported, "nccl across nodes unavailable: this build has no NCCL");
}

#endif

}  // namespace tpnode::collectives::cuda
