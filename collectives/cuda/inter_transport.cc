#include "collectives/cuda/inter_transport.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "common/error.h"

namespace tpnode::collectives::cuda {
namespace {

// "0,1,5" (all the ranks for which pred holds).
template <typename Pred>
std::string ranksWhere(std::span<const InterRecord> ranks, Pred pred) {
  std::string list;
  for (size_t g = 0; g < ranks.size(); ++g) {
    if (pred(ranks[g])) list += (list.empty() ? "" : ",") + std::to_string(g);
  }
  return list;
}

std::string formatProbeBytes(size_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= 1024 && bytes % 1024 == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

}  // namespace

std::string_view interTransportName(InterTransport t) {
  switch (t) {
    case InterTransport::kAuto:
      return "auto";
    case InterTransport::kMesh:
      return "mesh";
    case InterTransport::kNccl:
      return "nccl";
  }
  return "unknown";
}

InterTransport parseInterTransport(std::string_view value, std::string_view what) {
  for (InterTransport t : {InterTransport::kAuto, InterTransport::kMesh, InterTransport::kNccl}) {
    if (value == interTransportName(t)) return t;
  }
  fail(ErrorCode::kInvalidArgument,
       "{}: unknown inter-node transport '{}' (expected auto, mesh or nccl)", what, value);
}

std::string_view interFailureText(InterFailure f) {
  switch (f) {
    case InterFailure::kNone:
      return "no failure";
    case InterFailure::kNotBuilt:
      return "built without NCCL";
    case InterFailure::kSharedGpu:
      return "local ranks share a GPU (NCCL refuses duplicate GPUs)";
    case InterFailure::kUniqueId:
      return "ncclGetUniqueId failed";
    case InterFailure::kInit:
      return "ncclCommInitRank failed or timed out";
    case InterFailure::kVerify:
      return "the known-values all-reduce failed";
    case InterFailure::kBadRecord:
      return "a malformed startup record was received";
  }
  return "unknown failure";
}

std::array<float, kRecordFloats> encodeRecord(const InterRecord& r) {
  return {static_cast<float>(static_cast<int>(r.requested)),
          static_cast<float>(static_cast<int>(r.failure)), static_cast<float>(r.nccl_us),
          static_cast<float>(r.mesh_us)};
}

InterRecord decodeRecord(std::span<const float> f) {
  InterRecord bad;
  bad.failure = InterFailure::kBadRecord;
  if (f.size() != kRecordFloats) return bad;
  auto small = [](float v, int max) {
    return std::isfinite(v) && v >= 0.0f && v <= static_cast<float>(max) && v == std::floor(v);
  };
  auto time = [](float v) { return std::isfinite(v) && v >= 0.0f; };
  if (!small(f[0], 2) || !small(f[1], 6) || !time(f[2]) || !time(f[3])) return bad;
  InterRecord r;
  r.requested = static_cast<InterTransport>(static_cast<int>(f[0]));
  r.failure = static_cast<InterFailure>(static_cast<int>(f[1]));
  r.nccl_us = f[2];
  r.mesh_us = f[3];
  return r;
}

std::vector<InterRecord> decodeRecords(std::span<const float> all) {
  std::vector<InterRecord> out;
  for (size_t i = 0; i + kRecordFloats <= all.size(); i += kRecordFloats) {
    out.push_back(decodeRecord(all.subspan(i, kRecordFloats)));
  }
  return out;
}

std::string interBlocker(std::span<const InterRecord> ranks) {
  if (ranks.empty()) return "no ranks";
  const std::string mesh =
      ranksWhere(ranks, [](const InterRecord& r) { return r.requested == InterTransport::kMesh; });
  if (!mesh.empty()) return fmt::format("--inter-transport mesh on rank(s) {}", mesh);
  // The first failing step names the reason (the same text on every rank).
  for (InterFailure f :
       {InterFailure::kBadRecord, InterFailure::kNotBuilt, InterFailure::kSharedGpu,
        InterFailure::kUniqueId, InterFailure::kInit, InterFailure::kVerify}) {
    const std::string list =
        ranksWhere(ranks, [f](const InterRecord& r) { return r.failure == f; });
    if (!list.empty()) return fmt::format("{} on rank(s) {}", interFailureText(f), list);
  }
  return {};
}

bool interTimed(std::span<const InterRecord> ranks) {
  return !ranks.empty() && std::all_of(ranks.begin(), ranks.end(), [](const InterRecord& r) {
    return r.requested == InterTransport::kAuto;
  });
}

InterDecision decideInter(std::span<const InterRecord> ranks, size_t probe_bytes) {
  InterDecision d;
  d.reason = interBlocker(ranks);
  if (!d.reason.empty()) return d;
  if (!interTimed(ranks)) {
    d.chosen = InterTransport::kNccl;
    d.reason = fmt::format("forced (--inter-transport nccl on rank(s) {})",
                           ranksWhere(ranks, [](const InterRecord& r) {
                             return r.requested == InterTransport::kNccl;
                           }));
    return d;
  }
  double nccl = 0.0, mesh = 0.0;
  for (const InterRecord& r : ranks) {
    nccl = std::max(nccl, r.nccl_us);
    mesh = std::max(mesh, r.mesh_us);
  }
  if (nccl <= 0.0 || mesh <= 0.0) {  // a step did not report: never guess
    d.reason = "the timed comparison is missing on some rank";
    return d;
  }
  d.chosen = nccl < mesh ? InterTransport::kNccl : InterTransport::kMesh;
  d.reason = fmt::format("measured nccl {:.1f} us, mesh {:.1f} us ({})", nccl, mesh,
                         formatProbeBytes(probe_bytes));
  return d;
}

}  // namespace tpnode::collectives::cuda
