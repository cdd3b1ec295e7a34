// Step progress messages: how node 0 tells which worker stalled a step. When a step outlasts
// --step-timeout, node 0 asks every live worker how far it got (a ProgressQuery of kind
// kProbe on kTagProgress); each worker's ProgressResponder (node/progress_responder.h)
// answers with a ProgressReport on kTagProgressReport: how many step commands of this session
// it received and how many it took up (began to run). A worker that took up fewer commands than
// node 0 sent it, or does not answer, stalled the step. Nothing is sent while steps finish in
// time.
//
// The same query of kind kTierCounters asks a worker for its ranks' Redis KV tier counters
// (node/kv_tier_tally.h): node 0 sends one to every worker about once a second while the tier
// is on (node/tier_counter_poll.h), and the responder answers with a TierReport on
// kTagTierReport, so that node 0's /metrics counts every rank of the cluster.
//
// Wire format (little endian, see docs/wire-protocol.md "Step progress"):
//   ProgressQuery  (16 bytes): u32 magic 'TPPQ' | u16 version | u16 kind | u32 probe | u32 node
//   ProgressReport (32 bytes): u32 magic 'TPPR' | u16 version | u16 reserved (0) | u32 probe |
//                              u32 node | u64 received | u64 begun
//   TierReport (16 + 24 n):    u32 magic 'TPTC' | u16 version | u16 n_ranks | u32 probe |
//                              u32 node | n_ranks x { u32 rank | u32 reserved (0) |
//                              u64 stored | u64 store_dropped }, ranks ascending
// decode*() treat the bytes as hostile: size, magic, version, kind, counts and reserved fields
// are checked; Error(kInvalidData) (kMismatch for another version) names the field and value.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "node/kv_tier_tally.h"

namespace tpnode::node {

enum class ProgressKind : uint16_t {
  kProbe = 1,         // answer with a ProgressReport carrying `probe`
  kTierCounters = 2,  // answer with a TierReport carrying `probe`
};

struct ProgressQuery {
  ProgressKind kind = ProgressKind::kProbe;
  uint32_t probe = 0;  // echoed in the report
  uint32_t node = 0;   // the worker asked (a report naming another node is refused)
};

struct ProgressReport {
  uint32_t probe = 0;     // the query answered
  uint32_t node = 0;      // the worker answering
  uint64_t received = 0;  // step commands (kStep, kReadTensor, kRetire) received this session
  uint64_t begun = 0;     // of those, taken up: its ranks began to run them
};

// A worker's ranks' Redis KV tier counters (stored and store_dropped are carried).
struct TierReport {
  uint32_t probe = 0;  // the query answered
  uint32_t node = 0;   // the worker answering
  std::vector<RankTierCounters> ranks;
};

inline constexpr uint32_t kProgressQueryMagic = 0x51505054;   // "TPPQ"
inline constexpr uint32_t kProgressReportMagic = 0x52505054;  // "TPPR"
inline constexpr uint32_t kTierReportMagic = 0x43545054;      // "TPTC"
inline constexpr uint16_t kProgressVersion = 2;
inline constexpr size_t kProgressQueryBytes = 16;
inline constexpr size_t kProgressReportBytes = 32;
inline constexpr size_t kTierReportHeaderBytes = 16;
inline constexpr size_t kTierReportRankBytes = 24;
inline constexpr size_t kMaxTierReportRanks = 1024;  // ranks of one node at most
inline constexpr size_t kMaxTierReportBytes =
    kTierReportHeaderBytes + kTierReportRankBytes * kMaxTierReportRanks;

std::array<std::byte, kProgressQueryBytes> encodeProgressQuery(const ProgressQuery& query);
ProgressQuery decodeProgressQuery(std::span<const std::byte> bytes);
std::array<std::byte, kProgressReportBytes> encodeProgressReport(const ProgressReport& report);
ProgressReport decodeProgressReport(std::span<const std::byte> bytes);
// Error(kInvalidArgument) for more than kMaxTierReportRanks ranks.
std::vector<std::byte> encodeTierReport(const TierReport& report);
TierReport decodeTierReport(std::span<const std::byte> bytes);

}  // namespace tpnode::node
