#include "collectives/wire_format.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "collectives/half.h"
#include "common/check.h"

namespace tpnode::collectives {
namespace {

void encodeQ8Block(const float* x, size_t n, std::byte* out) {
  float amax = 0;
  for (size_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  const uint16_t d16 = f32ToF16(d);
  out[0] = static_cast<std::byte>(d16 & 0xFF);
  out[1] = static_cast<std::byte>(d16 >> 8);
  for (size_t i = 0; i < kQ8Block; ++i) {
    const float v = i < n ? std::round(x[i] * id) : 0.0f;
    out[2 + i] = static_cast<std::byte>(static_cast<int8_t>(v));
  }
}

template <bool kAdd>
void decodeQ8(const std::byte* src, size_t count, float* dst) {
  for (size_t b = 0; b * kQ8Block < count; ++b) {
    const std::byte* blk = src + b * kQ8BlockBytes;
    const float d = f16ToF32(static_cast<uint16_t>(std::to_integer<uint16_t>(blk[0]) |
                                                   std::to_integer<uint16_t>(blk[1]) << 8));
    const size_t n = count - b * kQ8Block < kQ8Block ? count - b * kQ8Block : kQ8Block;
    float* out = dst + b * kQ8Block;
    for (size_t i = 0; i < n; ++i) {
      const float v = d * static_cast<float>(static_cast<int8_t>(blk[2 + i]));
      if constexpr (kAdd) {
        out[i] += v;
      } else {
        out[i] = v;
      }
    }
  }
}

template <bool kAdd>
void decodeBf16(const std::byte* src, size_t count, float* dst) {
  for (size_t i = 0; i < count; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    const float v = bf16ToF32(h);
    if constexpr (kAdd) {
      dst[i] += v;
    } else {
      dst[i] = v;
    }
  }
}

}  // namespace

size_t WireCodec::encodedBytes(size_t count) const {
  switch (format_) {
    case WireFormat::kNative:
      return count * dtypeSize(dtype_);
    case WireFormat::kBF16:
      return count * 2;
    case WireFormat::kQ8_0:
      return (count + kQ8Block - 1) / kQ8Block * kQ8BlockBytes;
  }
  return 0;
}

void WireCodec::encode(const void* src, size_t count, std::byte* dst) const {
  const auto* x = static_cast<const float*>(src);
  if (format_ == WireFormat::kBF16) {
    for (size_t i = 0; i < count; ++i) {
      const uint16_t h = f32ToBf16(x[i]);
      std::memcpy(dst + 2 * i, &h, 2);
    }
    return;
  }
  TP_CHECK(format_ == WireFormat::kQ8_0);
  for (size_t b = 0; b * kQ8Block < count; ++b) {
    const size_t n = count - b * kQ8Block < kQ8Block ? count - b * kQ8Block : kQ8Block;
    encodeQ8Block(x + b * kQ8Block, n, dst + b * kQ8BlockBytes);
  }
}

void WireCodec::decode(const std::byte* src, size_t count, void* dst) const {
  if (format_ == WireFormat::kBF16) return decodeBf16<false>(src, count, static_cast<float*>(dst));
  TP_CHECK(format_ == WireFormat::kQ8_0);
  decodeQ8<false>(src, count, static_cast<float*>(dst));
}

void WireCodec::decodeAdd(const std::byte* src, size_t count, void* acc) const {
  if (format_ == WireFormat::kBF16) return decodeBf16<true>(src, count, static_cast<float*>(acc));
  TP_CHECK(format_ == WireFormat::kQ8_0);
  decodeQ8<true>(src, count, static_cast<float*>(acc));
}

}  // namespace tpnode::collectives
