#include "node/pipeline_wire.h"

#include <bit>
#include <cstring>

#include "common/byte_order.h"
#include "common/error.h"

namespace tpnode::node {

static_assert(std::endian::native == std::endian::little,
              "the hidden state travels as little-endian f32, copied as it is in memory");
static_assert(sizeof(float) == 4);

namespace {

const uint8_t* u8(std::span<const std::byte> b) {
  return reinterpret_cast<const uint8_t*>(b.data());
}

void expectField(const char* field, uint64_t got, uint64_t want) {
  if (got != want) {
    fail(ErrorCode::kInvalidData, "pipeline message: {} is {}, expected {}", field, got, want);
  }
}

}  // namespace

size_t hiddenMessageBytes(uint32_t rows, uint32_t cols) {
  return kHiddenHeaderBytes + size_t{rows} * size_t{cols} * sizeof(float);
}

void encodeHidden(const HiddenHeader& h, const float* data, std::vector<std::byte>& out) {
  out.resize(hiddenMessageBytes(h.rows, h.cols));
  uint8_t* p = reinterpret_cast<uint8_t*>(out.data());
  storeLE32(p, kHiddenMagic);
  storeLE16(p + 4, kHiddenVersion);
  storeLE16(p + 6, static_cast<uint16_t>(h.kind));
  storeLE64(p + 8, h.step);
  storeLE32(p + 16, h.micro);
  storeLE32(p + 20, h.micros);
  storeLE32(p + 24, h.rows);
  storeLE32(p + 28, h.cols);
  if (out.size() > kHiddenHeaderBytes) {
    std::memcpy(p + kHiddenHeaderBytes, data, out.size() - kHiddenHeaderBytes);
  }
}

void decodeHidden(std::span<const std::byte> bytes, const HiddenHeader& want,
                  std::vector<float>& out) {
  if (bytes.size() < kHiddenHeaderBytes) {
    fail(ErrorCode::kInvalidData, "pipeline message of {} bytes: shorter than its {}-byte header",
         bytes.size(), kHiddenHeaderBytes);
  }
  const uint8_t* p = u8(bytes);
  expectField("magic", loadLE32(p), kHiddenMagic);
  expectField("version", loadLE16(p + 4), kHiddenVersion);
  if (loadLE16(p + 6) == static_cast<uint16_t>(HiddenKind::kAbort)) {
    fail(ErrorCode::kPeerLost, "pipeline: an earlier stage failed its part of step {}",
         loadLE64(p + 8));
  }
  expectField("kind", loadLE16(p + 6), static_cast<uint16_t>(want.kind));
  expectField("step", loadLE64(p + 8), want.step);
  expectField("micro-batch", loadLE32(p + 16), want.micro);
  expectField("micro-batch count", loadLE32(p + 20), want.micros);
  expectField("rows", loadLE32(p + 24), want.rows);
  expectField("cols", loadLE32(p + 28), want.cols);
  expectField("size", bytes.size(), hiddenMessageBytes(want.rows, want.cols));
  out.resize(size_t{want.rows} * want.cols);
  if (!out.empty()) std::memcpy(out.data(), p + kHiddenHeaderBytes, out.size() * sizeof(float));
}

void encodeExpertLoad(uint64_t step, std::span<const uint64_t> pairs, std::vector<std::byte>& out) {
  static_assert(sizeof(uint64_t) == 2 * sizeof(float));
  const HiddenHeader h{HiddenKind::kExperts, step, 0, 1, static_cast<uint32_t>(pairs.size()), 2};
  encodeHidden(h, reinterpret_cast<const float*>(pairs.data()), out);  // copied as bytes
}

std::vector<uint64_t> decodeExpertLoad(std::span<const std::byte> bytes, uint64_t step,
                                       uint32_t ranks) {
  std::vector<float> words;
  decodeHidden(bytes, HiddenHeader{HiddenKind::kExperts, step, 0, 1, ranks, 2}, words);
  std::vector<uint64_t> pairs(ranks);
  std::memcpy(pairs.data(), words.data(), pairs.size() * sizeof(uint64_t));
  return pairs;
}

void encodeTierLoads(uint64_t round, const std::vector<bool>& loaded, std::vector<std::byte>& out) {
  std::vector<float> flags(loaded.size());
  for (size_t i = 0; i < loaded.size(); ++i) flags[i] = loaded[i] ? 1.0f : 0.0f;
  const HiddenHeader h{
      HiddenKind::kTierLoads, round, 0, 1, static_cast<uint32_t>(loaded.size()), 1};
  encodeHidden(h, flags.data(), out);
}

std::vector<bool> decodeTierLoads(std::span<const std::byte> bytes, uint64_t round,
                                  uint32_t loads) {
  std::vector<float> flags;
  decodeHidden(bytes, HiddenHeader{HiddenKind::kTierLoads, round, 0, 1, loads, 1}, flags);
  std::vector<bool> loaded(flags.size());
  for (size_t i = 0; i < flags.size(); ++i) {
    if (flags[i] != 0.0f && flags[i] != 1.0f) {
      fail(ErrorCode::kInvalidData, "pipeline message: tier load flag {} is {}, expected 0 or 1", i,
           flags[i]);
    }
    loaded[i] = flags[i] == 1.0f;
  }
  return loaded;
}

}  // namespace tpnode::node
