// InterTransport: how the GPU ranks of different nodes reduce. `mesh`: the local op on the
// GPU, then the host communicator over the TCP mesh (staged through pinned memory). `nccl`: one
// NCCL communicator over every GPU rank of every node (size = the host communicator's size(),
// rank = the global rank); its ncclUniqueId travels over the mesh, which stays the control
// plane. This file is the pure part — names, the per-rank record every rank shares over the
// host communicator, and the decision — so that it builds and is tested without CUDA.
//
// Contract
// - Every rank gathers the same records (Communicator::allGather) and calls the same pure
//   functions on them, so every rank of every node takes the same decision.
// - A record is kRecordFloats f32 on the wire; decodeRecord treats the received values as
//   hostile (out-of-range fields become a failure, never undefined behaviour).
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tpnode::collectives::cuda {

enum class InterTransport { kAuto = 0, kMesh = 1, kNccl = 2 };
std::string_view interTransportName(InterTransport t);  // "auto", "mesh", "nccl"
// Parses "auto|mesh|nccl"; Error(kInvalidArgument) naming `what` and the value otherwise.
InterTransport parseInterTransport(std::string_view value, std::string_view what);

// The step at which NCCL across nodes failed on one rank (kNone: not failed so far).
enum class InterFailure {
  kNone = 0,
  kNotBuilt = 1,   // this build has no NCCL
  kSharedGpu = 2,  // local ranks share a GPU (NCCL refuses duplicate GPUs)
  kUniqueId = 3,   // ncclGetUniqueId failed on global rank 0
  kInit = 4,       // ncclCommInitRankConfig failed or timed out
  kVerify = 5,     // the known-values all-reduce failed or mismatched
  kBadRecord = 6,  // a record received from this rank was malformed
};
std::string_view interFailureText(InterFailure f);

// What one rank reports after each step of the startup check.
struct InterRecord {
  InterTransport requested = InterTransport::kAuto;
  InterFailure failure = InterFailure::kNone;
  double nccl_us = 0.0;  // median of the timed all-reduces (0: not timed)
  double mesh_us = 0.0;
};

inline constexpr size_t kRecordFloats = 4;
std::array<float, kRecordFloats> encodeRecord(const InterRecord& r);
InterRecord decodeRecord(std::span<const float> f);
// All records from the gathered floats (size() * kRecordFloats of them, in rank order).
std::vector<InterRecord> decodeRecords(std::span<const float> all);

// "" while NCCL across nodes is still possible given every rank's record, else why not, e.g.
// "--inter-transport mesh on rank(s) 2,3" or "ncclCommInitRank failed or timed out on rank(s)
// 0,1". Decides whether the next step of the check runs (the same answer on every rank).
std::string interBlocker(std::span<const InterRecord> ranks);

// Whether the timed comparison runs: only when every rank asked for auto.
bool interTimed(std::span<const InterRecord> ranks);

struct InterDecision {
  InterTransport chosen = InterTransport::kMesh;
  std::string reason;  // "measured nccl 12.0 us, mesh 80.5 us (16 KiB)", "forced", the blocker
};

// The final choice once every step that runs has run. nccl when nothing blocks it and either a
// rank forced it or it measured faster (the slowest rank's median counts, per path); mesh
// otherwise. A rank that forced nccl and gets mesh must refuse to start (its caller's job).
InterDecision decideInter(std::span<const InterRecord> ranks, size_t probe_bytes);

}  // namespace tpnode::collectives::cuda
