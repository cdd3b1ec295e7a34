// The inter-node transport check of DeviceGroup::create (several nodes): every GPU rank of
// every node runs the same steps over its host Communicator, shares a record after each
// (allGather), and applies the pure decision of inter_transport.h, so all ranks agree.
//   1. wishes: the requested mode and whether NCCL can be tried here at all;
//   2. global rank 0's ncclUniqueId is broadcast; every rank runs ncclCommInitRankConfig
//      (non-blocking, with a deadline) on its own thread with its device current;
//   3. a known-values all-reduce over the new communicator;
//   4. auto only: the NCCL communicator and the mesh path are timed on the probe size.
// A step runs only when no rank reported a blocker in the previous one.
#include "collectives/cuda/inter_select.h"

#include <cstring>
#include <mutex>
#include <set>

#include <fmt/format.h>

#include "collectives/cuda/cuda_resources.h"
#include "collectives/cuda/device_local_op.h"
#include "collectives/cuda/device_verify.h"
#include "common/error.h"
#include "common/log.h"

namespace tpnode::collectives::cuda {
namespace {

std::vector<InterRecord> exchange(Communicator& host, const InterRecord& mine) {
  const auto encoded = encodeRecord(mine);
  std::vector<float> all(static_cast<size_t>(host.size()) * kRecordFloats);
  host.allGather(encoded.data(), all.data(), kRecordFloats, DType::kF32);
  auto records = decodeRecords(all);
  records.resize(static_cast<size_t>(host.size()));  // a short answer cannot happen; be safe
  return records;
}

// Step 2 on one rank: the id from global rank 0 (a status float, then the id's bytes), then
// the communicator. Sets mine.failure / detail on failure.
std::shared_ptr<NcclGlobal> initStep(Communicator& host, int device,
                                     std::chrono::milliseconds timeout, InterRecord& mine,
                                     std::string& detail) {
  constexpr size_t kIdFloats = kNcclIdBytes / sizeof(float);
  std::array<float, 1 + kIdFloats> msg{};
  if (host.rank() == 0) {
    try {
      const NcclId id = ncclGlobalUniqueId();
      std::memcpy(&msg[1], id.data(), id.size());
      msg[0] = 1.0f;
    } catch (const Error& e) {
      detail = e.what();
    }
  }
  host.broadcast(msg.data(), msg.size(), DType::kF32, 0);
  if (msg[0] != 1.0f) {  // the same on every rank: all take the mesh
    mine.failure = InterFailure::kUniqueId;
    return nullptr;
  }
  NcclId id;
  std::memcpy(id.data(), &msg[1], id.size());
  try {
    return initNcclGlobal(id, host.size(), host.rank(), device, timeout);
  } catch (const Error& e) {
    mine.failure = InterFailure::kInit;
    detail = e.what();
    return nullptr;
  }
}

// Step 3: the shared verify-by-reduction (collectives/verify.h) through the NCCL communicator.
void verifyStep(DeviceLocalOp& op, const Communicator& host, float* buf, size_t count,
                cudaStream_t stream) {
  const VerifyResult result =
      verifyOnDevice([&](float* d, size_t n, cudaStream_t s) { op.allReduceSum(d, n, s); },
                     host.rank(), host.size(), buf, count, stream, "inter-node nccl self-test");
  if (!result.ok) fail(ErrorCode::kInternal, "{}", result.describe());
}

}  // namespace

InterSelection selectInter(std::vector<std::unique_ptr<DeviceComm>>& mesh_comms,
                           const std::vector<Communicator*>& host_comms,
                           const std::vector<int>& devices, const InterOptions& options,
                           size_t max_count, size_t probe_count) {
  const size_t ranks = devices.size();
  const bool shared_gpu = std::set<int>(devices.begin(), devices.end()).size() != ranks;
  InterSelection sel;
  sel.globals.resize(ranks);
  sel.details.resize(ranks);
  std::mutex mutex;
  runLocalRanks(
      devices,
      [&](int r) {
        const size_t ur = static_cast<size_t>(r);
        Communicator& host = *host_comms[ur];
        const int device = devices[ur];
        std::string& detail = sel.details[ur];
        InterRecord mine;
        mine.requested = options.requested;
        if (options.requested != InterTransport::kMesh) {
          if (!ncclBuilt()) {
            mine.failure = InterFailure::kNotBuilt;
          } else if (shared_gpu) {
            mine.failure = InterFailure::kSharedGpu;
          }
        }
        auto records = exchange(host, mine);
        std::shared_ptr<NcclGlobal> global;
        if (interBlocker(records).empty()) {
          global = initStep(host, device, options.init_timeout, mine, detail);
          records = exchange(host, mine);
        }
        Stream stream(device);
        DeviceBuffer buf(device, std::max(probe_count, std::min<size_t>(max_count, 4099)));
        std::unique_ptr<DeviceLocalOp> op;
        if (interBlocker(records).empty()) {
          try {
            op = createNcclGlobalOp(global);
            verifyStep(*op, host, buf.get(), std::min<size_t>(max_count, 4099), stream.get());
          } catch (const Error& e) {
            mine.failure = InterFailure::kVerify;
            detail = e.what();
          }
          records = exchange(host, mine);
        }
        if (interBlocker(records).empty() && interTimed(records)) {
          try {
            mine.nccl_us = medianReduceMicros(
                [&](float* d, size_t n, cudaStream_t s) { op->allReduceSum(d, n, s); }, buf.get(),
                probe_count, stream.get());
          } catch (const Error& e) {
            mine.failure = InterFailure::kVerify;
            detail = e.what();
            op.reset();
            global.reset();  // broken: aborted, so that nothing stays queued on the GPU
          }
          // Every rank times the mesh path whatever happened above (host collectives in step).
          DeviceComm& mesh = *mesh_comms[ur];
          mine.mesh_us = medianReduceMicros(
              [&](float* d, size_t n, cudaStream_t s) { mesh.allReduceSum(d, n, s); }, buf.get(),
              probe_count, stream.get());
          records = exchange(host, mine);
        }
        const InterDecision decision = decideInter(records, probe_count * sizeof(float));
        op.reset();
        if (decision.chosen == InterTransport::kNccl) sel.globals[ur] = std::move(global);
        global.reset();
        if (r == 0) {
          std::lock_guard lock(mutex);
          sel.decision = decision;
        }
      },
      [](const std::string&) {});
  return sel;
}

}  // namespace tpnode::collectives::cuda
