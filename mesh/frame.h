// The mesh wire frame: a fixed 32-byte header followed by `length` payload bytes. This header
// and docs/wire-protocol.md are the only definition of the format.
//
// Contract
// - Every field is little-endian and encoded field by field (common/byte_order.h); nothing is
//   memcpy'd from a struct.
// - decodeFrameHeader() treats its input as hostile: every malformed case (magic, version,
//   type, reserved bits, a length above the limit of the frame type) throws Error(kInvalidData),
//   or Error(kMismatch) for a different protocol version, with a message naming the field and
//   the value. It never allocates and never reads past the 32 bytes it is given.
// - Pure functions; any thread.
//
// Layout (offsets in bytes):
//    0  u32  magic    0x4D4E5054 ("TPNM" in byte order)
//    4  u16  version  kProtocolVersion
//    6  u8   type     FrameType
//    7  u8   flags    must be 0
//    8  u32  tag      message tag (kData); 0 otherwise
//   12  u32  reserved must be 0
//   16  u64  seq      per-socket sequence number of data frames, starting at 0
//   24  u64  length   payload bytes that follow
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace tpnode::mesh {

inline constexpr uint32_t kFrameMagic = 0x4D4E5054;  // bytes 'T' 'P' 'N' 'M'
inline constexpr uint16_t kProtocolVersion = 2;
inline constexpr size_t kFrameHeaderSize = 32;

// Limits of the control frames; data frames are limited by MeshOptions::max_frame_bytes.
inline constexpr uint64_t kMaxHandshakePayload = 8192;
inline constexpr uint64_t kHeartbeatPayload = 8;  // sender's steady clock, microseconds

enum class FrameType : uint8_t {
  // Handshake (see handshake.h), in the order they are sent:
  kChallenge = 2,  // acceptor -> dialer: a fresh nonce, nothing else
  kHello = 1,      // dialer -> acceptor: who I am, my nonce and my proof of the secret
  kWelcome = 5,    // acceptor -> dialer (after verifying HELLO): its proof and the fingerprint
  kAccept = 3,     // dialer -> acceptor: the fingerprints agree; the link is up
  kRefuse = 4,     // either side: I refuse you, with a reason; the sender closes
  kData = 8,       // a user message on `tag`
  kHeartbeat = 9,  // sent on idle links; carries no meaning besides "alive"
  kGoodbye = 10,   // orderly close: the sender shuts down; not a fault
};

std::string_view frameTypeName(FrameType type);

struct FrameHeader {
  FrameType type = FrameType::kData;
  uint32_t tag = 0;
  uint64_t seq = 0;
  uint64_t length = 0;
};

using HeaderBytes = std::span<uint8_t, kFrameHeaderSize>;
using ConstHeaderBytes = std::span<const uint8_t, kFrameHeaderSize>;

void encodeFrameHeader(const FrameHeader& header, HeaderBytes out);

// Decodes and validates a received header. `max_data_bytes` bounds kData payloads; control
// frames have their own fixed bounds. Throws as described in the contract.
FrameHeader decodeFrameHeader(ConstHeaderBytes in, uint64_t max_data_bytes);

}  // namespace tpnode::mesh
