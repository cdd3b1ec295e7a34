// libFuzzer target: the frame header decoder on hostile bytes. Every input must either decode
// to a header within the limits or throw tpnode::Error; nothing else (no crash, no sanitizer
// report, no other exception).
#include <cstddef>
#include <cstdint>

#include "common/check.h"
#include "common/error.h"
#include "mesh/frame.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpnode::mesh;
  if (size < kFrameHeaderSize) return 0;
  // The first 8 bytes past the header choose the data-frame limit.
  uint64_t limit = 1 << 20;
  if (size >= kFrameHeaderSize + 8) {
    limit = 0;
    for (int i = 0; i < 8; ++i) limit |= uint64_t{data[kFrameHeaderSize + i]} << (8 * i);
  }
  try {
    FrameHeader h = decodeFrameHeader(ConstHeaderBytes(data, kFrameHeaderSize), limit);
    TP_CHECK(h.type != FrameType::kData || h.length <= limit);
    TP_CHECK(h.length <= std::max<uint64_t>(limit, kMaxHandshakePayload));
    // Re-encoding a valid header gives back the same bytes.
    uint8_t again[kFrameHeaderSize];
    encodeFrameHeader(h, HeaderBytes(again, kFrameHeaderSize));
    for (size_t i = 0; i < kFrameHeaderSize; ++i) TP_CHECK(again[i] == data[i]);
  } catch (const tpnode::Error& e) {
    if (e.code() == tpnode::ErrorCode::kInternal) throw;
  }
  return 0;
}
