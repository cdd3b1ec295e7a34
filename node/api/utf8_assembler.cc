#include "node/api/utf8_assembler.h"

#include <cstdint>

namespace tpnode::node::api {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Length of the sequence a lead byte starts (0: not a lead byte).
int sequenceLength(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// Whether byte `b` may follow at position `i` (1..3) of a sequence starting with `lead`.
bool validContinuation(uint8_t lead, int i, uint8_t b) {
  if (i == 1) {
    if (lead == 0xE0) return b >= 0xA0 && b <= 0xBF;  // no overlongs
    if (lead == 0xED) return b >= 0x80 && b <= 0x9F;  // no surrogates
    if (lead == 0xF0) return b >= 0x90 && b <= 0xBF;  // no overlongs
    if (lead == 0xF4) return b >= 0x80 && b <= 0x8F;  // <= U+10FFFF
  }
  return b >= 0x80 && b <= 0xBF;
}

enum class Scan { kComplete, kIncomplete, kInvalid };

// Examines the sequence at text[pos]; `used` is the bytes it covers (the maximal subpart when
// invalid, everything that is there when incomplete).
Scan scanOne(std::string_view text, size_t pos, size_t& used) {
  auto lead = static_cast<uint8_t>(text[pos]);
  int len = sequenceLength(lead);
  if (len == 0) {
    used = 1;
    return Scan::kInvalid;
  }
  for (int i = 1; i < len; ++i) {
    if (pos + static_cast<size_t>(i) >= text.size()) {
      used = static_cast<size_t>(i);
      return Scan::kIncomplete;
    }
    if (!validContinuation(lead, i, static_cast<uint8_t>(text[pos + static_cast<size_t>(i)]))) {
      used = static_cast<size_t>(i);
      return Scan::kInvalid;
    }
  }
  used = static_cast<size_t>(len);
  return Scan::kComplete;
}

}  // namespace

std::string Utf8Assembler::push(std::string_view piece) {
  held_.append(piece);
  std::string out;
  out.reserve(held_.size());
  size_t pos = 0;
  while (pos < held_.size()) {
    size_t used = 0;
    Scan s = scanOne(held_, pos, used);
    if (s == Scan::kIncomplete) break;
    if (s == Scan::kComplete) {
      out.append(held_, pos, used);
    } else {
      out.append(kReplacement);
    }
    pos += used;
  }
  held_.erase(0, pos);
  return out;
}

std::string Utf8Assembler::finish() {
  std::string out = held_.empty() ? std::string() : std::string(kReplacement);
  held_.clear();
  return out;
}

bool isValidUtf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t used = 0;
    if (scanOne(text, pos, used) != Scan::kComplete) return false;
    pos += used;
  }
  return true;
}

}  // namespace tpnode::node::api
