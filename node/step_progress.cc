#include "node/step_progress.h"

#include "common/byte_order.h"
#include "common/error.h"

namespace tpnode::node {
namespace {

template <size_t N>
uint8_t* at(std::array<std::byte, N>& bytes, size_t offset) {
  return reinterpret_cast<uint8_t*>(bytes.data() + offset);
}

const uint8_t* at(std::span<const std::byte> bytes, size_t offset) {
  return reinterpret_cast<const uint8_t*>(bytes.data() + offset);
}

uint8_t* at(std::vector<std::byte>& bytes, size_t offset) {
  return reinterpret_cast<uint8_t*>(bytes.data() + offset);
}

// Magic and version of any message (at least 8 bytes); returns the kind / reserved / count.
uint16_t checkMagic(std::span<const std::byte> bytes, const char* what, uint32_t magic) {
  if (const uint32_t m = loadLE32(at(bytes, 0)); m != magic) {
    fail(ErrorCode::kInvalidData, "{} magic 0x{:08x}, expected 0x{:08x}", what, m, magic);
  }
  if (const uint16_t v = loadLE16(at(bytes, 4)); v != kProgressVersion) {
    fail(ErrorCode::kMismatch, "{} version {}, this build speaks {}", what, v, kProgressVersion);
  }
  return loadLE16(at(bytes, 6));
}

// Size, magic and version of a fixed-size message; returns the kind / reserved field.
uint16_t checkHeader(std::span<const std::byte> bytes, const char* what, size_t size,
                     uint32_t magic) {
  if (bytes.size() != size) {
    fail(ErrorCode::kInvalidData, "{} of {} bytes, expected {}", what, bytes.size(), size);
  }
  return checkMagic(bytes, what, magic);
}

}  // namespace

std::array<std::byte, kProgressQueryBytes> encodeProgressQuery(const ProgressQuery& q) {
  std::array<std::byte, kProgressQueryBytes> out{};
  storeLE32(at(out, 0), kProgressQueryMagic);
  storeLE16(at(out, 4), kProgressVersion);
  storeLE16(at(out, 6), static_cast<uint16_t>(q.kind));
  storeLE32(at(out, 8), q.probe);
  storeLE32(at(out, 12), q.node);
  return out;
}

ProgressQuery decodeProgressQuery(std::span<const std::byte> bytes) {
  const uint16_t kind =
      checkHeader(bytes, "progress query", kProgressQueryBytes, kProgressQueryMagic);
  if (kind != static_cast<uint16_t>(ProgressKind::kProbe) &&
      kind != static_cast<uint16_t>(ProgressKind::kTierCounters)) {
    fail(ErrorCode::kInvalidData, "progress query kind {} is unknown", kind);
  }
  ProgressQuery q;
  q.kind = static_cast<ProgressKind>(kind);
  q.probe = loadLE32(at(bytes, 8));
  q.node = loadLE32(at(bytes, 12));
  return q;
}

std::array<std::byte, kProgressReportBytes> encodeProgressReport(const ProgressReport& r) {
  std::array<std::byte, kProgressReportBytes> out{};
  storeLE32(at(out, 0), kProgressReportMagic);
  storeLE16(at(out, 4), kProgressVersion);
  storeLE16(at(out, 6), 0);
  storeLE32(at(out, 8), r.probe);
  storeLE32(at(out, 12), r.node);
  storeLE64(at(out, 16), r.received);
  storeLE64(at(out, 24), r.begun);
  return out;
}

ProgressReport decodeProgressReport(std::span<const std::byte> bytes) {
  const uint16_t reserved =
      checkHeader(bytes, "progress report", kProgressReportBytes, kProgressReportMagic);
  if (reserved != 0) fail(ErrorCode::kInvalidData, "progress report reserved field {}", reserved);
  ProgressReport r;
  r.probe = loadLE32(at(bytes, 8));
  r.node = loadLE32(at(bytes, 12));
  r.received = loadLE64(at(bytes, 16));
  r.begun = loadLE64(at(bytes, 24));
  if (r.begun > r.received) {
    fail(ErrorCode::kInvalidData, "progress report begun {} exceeds received {}", r.begun,
         r.received);
  }
  return r;
}

std::vector<std::byte> encodeTierReport(const TierReport& r) {
  if (r.ranks.size() > kMaxTierReportRanks) {
    fail(ErrorCode::kInvalidArgument, "a tier report of {} ranks, at most {}", r.ranks.size(),
         kMaxTierReportRanks);
  }
  std::vector<std::byte> out(kTierReportHeaderBytes + kTierReportRankBytes * r.ranks.size());
  storeLE32(at(out, 0), kTierReportMagic);
  storeLE16(at(out, 4), kProgressVersion);
  storeLE16(at(out, 6), static_cast<uint16_t>(r.ranks.size()));
  storeLE32(at(out, 8), r.probe);
  storeLE32(at(out, 12), r.node);
  size_t o = kTierReportHeaderBytes;
  for (const RankTierCounters& rc : r.ranks) {
    storeLE32(at(out, o), rc.rank);
    storeLE32(at(out, o + 4), 0);
    storeLE64(at(out, o + 8), rc.counters.stored);
    storeLE64(at(out, o + 16), rc.counters.store_dropped);
    o += kTierReportRankBytes;
  }
  return out;
}

TierReport decodeTierReport(std::span<const std::byte> bytes) {
  if (bytes.size() < kTierReportHeaderBytes) {
    fail(ErrorCode::kInvalidData, "tier report of {} bytes, at least {}", bytes.size(),
         kTierReportHeaderBytes);
  }
  const uint16_t n = checkMagic(bytes, "tier report", kTierReportMagic);
  if (n > kMaxTierReportRanks) {
    fail(ErrorCode::kInvalidData, "tier report of {} ranks, at most {}", n, kMaxTierReportRanks);
  }
  if (const size_t want = kTierReportHeaderBytes + kTierReportRankBytes * size_t{n};
      bytes.size() != want) {
    fail(ErrorCode::kInvalidData, "tier report of {} ranks in {} bytes, expected {}", n,
         bytes.size(), want);
  }
  TierReport r;
  r.probe = loadLE32(at(bytes, 8));
  r.node = loadLE32(at(bytes, 12));
  for (size_t i = 0, o = kTierReportHeaderBytes; i < n; ++i, o += kTierReportRankBytes) {
    RankTierCounters rc;
    rc.rank = loadLE32(at(bytes, o));
    if (const uint32_t reserved = loadLE32(at(bytes, o + 4)); reserved != 0) {
      fail(ErrorCode::kInvalidData, "tier report rank {} reserved field {}", rc.rank, reserved);
    }
    if (!r.ranks.empty() && rc.rank <= r.ranks.back().rank) {
      fail(ErrorCode::kInvalidData, "tier report rank {} after rank {} (ranks ascend)", rc.rank,
           r.ranks.back().rank);
    }
    rc.counters.stored = loadLE64(at(bytes, o + 8));
    rc.counters.store_dropped = loadLE64(at(bytes, o + 16));
    r.ranks.push_back(rc);
  }
  return r;
}

}  // namespace tpnode::node
