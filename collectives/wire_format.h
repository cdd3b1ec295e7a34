// The encodings of inter-node all-reduce payloads. Defined once here; see docs/collectives.md
// for the measured error of the lossy ones.
//
// - kNative: the buffer's own dtype, little-endian as in memory (x86-64/aarch64 hosts).
// - kBF16 (f32 buffers only): each f32 rounded to bfloat16 (nearest even), 2 bytes/element.
// - kQ8_0 (f32 buffers only): GGUF's Q8_0 layout: blocks of 32 elements, each an f16 scale d
//   (little-endian) then 32 int8 q with x ~= d * q; d = max|x| / 127, q = round(x / d).
//   A partial last block is padded with zeros. 34 bytes per 32 elements.
// f16 and bf16 buffers always travel natively (a lossy format buys nothing on 2-byte data).
//
// Received bytes are hostile: the caller checks that a message has exactly encodedBytes()
// bytes before decoding; every bit pattern then decodes to some float (no memory hazard).
#pragma once

#include <cstddef>

#include "collectives/communicator.h"
#include "collectives/options.h"

namespace tpnode::collectives {

inline constexpr size_t kQ8Block = 32;
inline constexpr size_t kQ8BlockBytes = 2 + kQ8Block;

class WireCodec {
 public:
  // A lossy format requested for a non-f32 dtype falls back to kNative.
  WireCodec(WireFormat format, DType dtype)
      : format_(dtype == DType::kF32 ? format : WireFormat::kNative), dtype_(dtype) {}

  bool native() const { return format_ == WireFormat::kNative; }
  WireFormat format() const { return format_; }
  size_t encodedBytes(size_t count) const;

  // dst gets encodedBytes(count) bytes. Only for !native().
  void encode(const void* src, size_t count, std::byte* dst) const;
  // dst (f32) = decode(src).
  void decode(const std::byte* src, size_t count, void* dst) const;
  // acc (f32) = acc + decode(src), element-wise.
  void decodeAdd(const std::byte* src, size_t count, void* acc) const;

 private:
  WireFormat format_;
  DType dtype_;
};

}  // namespace tpnode::collectives
