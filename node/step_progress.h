// Step progress messages: how node 0 tells which worker stalled a step. When a step outlasts
// --step-timeout, node 0 asks every live worker how far it got (a ProgressQuery of kind
// kProbe on kTagProgress); each worker's ProgressResponder (node/progress_responder.h)
// answers with a ProgressReport on kTagProgressReport: how many step commands of this session
// it received and how many it took up (began to run). A worker that took up fewer commands than
// node 0 sent it, or does not answer, stalled the step. Nothing is sent while steps finish in
// time.
//
// Wire format (little endian, fixed sizes, see docs/wire-protocol.md "Control messages"):
//   ProgressQuery  (16 bytes): u32 magic 'TPPQ' | u16 version | u16 kind | u32 probe | u32 node
//   ProgressReport (32 bytes): u32 magic 'TPPR' | u16 version | u16 reserved (0) | u32 probe |
//                              u32 node | u64 received | u64 begun
// decode*() treat the bytes as hostile: size, magic, version, kind and reserved fields are
// checked; Error(kInvalidData) (kMismatch for another version) names the field and value.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace tpnode::node {

enum class ProgressKind : uint16_t {
  kProbe = 1,  // answer with a ProgressReport carrying `probe`
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

inline constexpr uint32_t kProgressQueryMagic = 0x51505054;   // "TPPQ"
inline constexpr uint32_t kProgressReportMagic = 0x52505054;  // "TPPR"
inline constexpr uint16_t kProgressVersion = 1;
inline constexpr size_t kProgressQueryBytes = 16;
inline constexpr size_t kProgressReportBytes = 32;

std::array<std::byte, kProgressQueryBytes> encodeProgressQuery(const ProgressQuery& query);
ProgressQuery decodeProgressQuery(std::span<const std::byte> bytes);
std::array<std::byte, kProgressReportBytes> encodeProgressReport(const ProgressReport& report);
ProgressReport decodeProgressReport(std::span<const std::byte> bytes);

}  // namespace tpnode::node
