#include "mesh/frame.h"

#include "common/byte_order.h"
#include "common/error.h"

namespace tpnode::mesh {

static_assert(kFrameHeaderSize == 4 + 2 + 1 + 1 + 4 + 4 + 8 + 8, "header layout");

std::string_view frameTypeName(FrameType type) {
  switch (type) {
    case FrameType::kHello:
      return "HELLO";
    case FrameType::kChallenge:
      return "CHALLENGE";
    case FrameType::kWelcome:
      return "WELCOME";
    case FrameType::kAccept:
      return "ACCEPT";
    case FrameType::kRefuse:
      return "REFUSE";
    case FrameType::kData:
      return "DATA";
    case FrameType::kHeartbeat:
      return "HEARTBEAT";
    case FrameType::kGoodbye:
      return "GOODBYE";
  }
  return "UNKNOWN";
}

void encodeFrameHeader(const FrameHeader& h, HeaderBytes out) {
  uint8_t* p = out.data();
  storeLE32(p + 0, kFrameMagic);
  storeLE16(p + 4, kProtocolVersion);
  p[6] = static_cast<uint8_t>(h.type);
  p[7] = 0;
  storeLE32(p + 8, h.tag);
  storeLE32(p + 12, 0);
  storeLE64(p + 16, h.seq);
  storeLE64(p + 24, h.length);
}

namespace {

// Largest payload a frame of `type` may carry; 0 for an unknown type.
bool payloadLimit(uint8_t type, uint64_t max_data_bytes, uint64_t& limit) {
  switch (static_cast<FrameType>(type)) {
    case FrameType::kHello:
    case FrameType::kWelcome:
    case FrameType::kRefuse:
      limit = kMaxHandshakePayload;
      return true;
    case FrameType::kChallenge:
      limit = 32;
      return true;
    case FrameType::kAccept:
    case FrameType::kGoodbye:
      limit = 0;
      return true;
    case FrameType::kHeartbeat:
      limit = kHeartbeatPayload;
      return true;
    case FrameType::kData:
      limit = max_data_bytes;
      return true;
  }
  return false;
}

}  // namespace

FrameHeader decodeFrameHeader(ConstHeaderBytes in, uint64_t max_data_bytes) {
  const uint8_t* p = in.data();
  uint32_t magic = loadLE32(p);
  if (magic != kFrameMagic) {
    fail(ErrorCode::kInvalidData,
         "frame header: magic 0x{:08x}, expected 0x{:08x} (not a tpnode mesh peer?)", magic,
         kFrameMagic);
  }
  uint16_t version = loadLE16(p + 4);
  if (version != kProtocolVersion) {
    fail(ErrorCode::kMismatch, "protocol version: this node speaks {}, the peer speaks {}",
         kProtocolVersion, version);
  }
  uint8_t type = p[6];
  uint64_t limit = 0;
  if (!payloadLimit(type, max_data_bytes, limit)) {
    fail(ErrorCode::kInvalidData, "frame header: unknown frame type {}", type);
  }
  if (p[7] != 0) fail(ErrorCode::kInvalidData, "frame header: flags 0x{:02x}, expected 0", p[7]);
  uint32_t reserved = loadLE32(p + 12);
  if (reserved != 0) {
    fail(ErrorCode::kInvalidData, "frame header: reserved field 0x{:08x}, expected 0", reserved);
  }
  FrameHeader h;
  h.type = static_cast<FrameType>(type);
  h.tag = loadLE32(p + 8);
  h.seq = loadLE64(p + 16);
  h.length = loadLE64(p + 24);
  if (h.length > limit) {
    fail(ErrorCode::kInvalidData, "frame header: {} frame of {} bytes exceeds the limit of {}",
         frameTypeName(h.type), h.length, limit);
  }
  if (h.type != FrameType::kData && h.tag != 0) {
    fail(ErrorCode::kInvalidData, "frame header: {} frame with tag {}, expected 0",
         frameTypeName(h.type), h.tag);
  }
  return h;
}

}  // namespace tpnode::mesh
