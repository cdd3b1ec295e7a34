#include "model/unicode.h"

#include <array>

#include <unicode/uchar.h>

namespace tpnode::model {

size_t utf8SequenceLength(uint8_t lead) {
  static constexpr size_t kLookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLookup[lead >> 4];
}

namespace {

bool isContinuation(uint8_t b) {
  return (b & 0xC0) == 0x80;
}

// Decodes one code point at text[*pos]; returns false (and leaves *pos) if malformed.
bool decodeOne(std::string_view text, size_t* pos, uint32_t* cpt) {
  const size_t n = text.size();
  const size_t i = *pos;
  const auto b = [&](size_t k) { return static_cast<uint8_t>(text[i + k]); };
  const uint8_t b0 = b(0);
  if (!(b0 & 0x80)) {
    *cpt = b0;
    *pos += 1;
    return true;
  }
  if (!(b0 & 0x40)) return false;
  if (!(b0 & 0x20)) {
    if (i + 1 >= n || !isContinuation(b(1))) return false;
    *cpt = ((b0 & 0x1Fu) << 6) | (b(1) & 0x3Fu);
    *pos += 2;
    return true;
  }
  if (!(b0 & 0x10)) {
    if (i + 2 >= n || !isContinuation(b(1)) || !isContinuation(b(2))) return false;
    *cpt = ((b0 & 0x0Fu) << 12) | ((b(1) & 0x3Fu) << 6) | (b(2) & 0x3Fu);
    *pos += 3;
    return true;
  }
  if (!(b0 & 0x08)) {
    if (i + 3 >= n || !isContinuation(b(1)) || !isContinuation(b(2)) || !isContinuation(b(3))) {
      return false;
    }
    *cpt = ((b0 & 0x07u) << 18) | ((b(1) & 0x3Fu) << 12) | ((b(2) & 0x3Fu) << 6) | (b(3) & 0x3Fu);
    *pos += 4;
    return true;
  }
  return false;
}

bool isWhitespace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

struct ByteAlphabet {
  std::array<std::string, 256> to_utf8;
  std::array<int, 324> from_cpt{};  // alphabet code points are all below 0x144

  ByteAlphabet() {
    from_cpt.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const uint32_t cpt = printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(next++);
      appendUtf8(cpt, to_utf8[b]);
      from_cpt[cpt] = b;
    }
  }
};

const ByteAlphabet& byteAlphabet() {
  static const ByteAlphabet alphabet;
  return alphabet;
}

}  // namespace

void decodeUtf8(std::string_view text, std::vector<uint32_t>& out) {
  out.clear();
  size_t pos = 0;
  while (pos < text.size()) {
    uint32_t cpt = 0;
    if (!decodeOne(text, &pos, &cpt)) {
      cpt = 0xFFFD;
      ++pos;
    }
    out.push_back(cpt);
  }
}

void appendUtf8(uint32_t cpt, std::string& out) {
  if (cpt < 0x80) {
    out.push_back(static_cast<char>(cpt));
  } else if (cpt < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | ((cpt >> 18) & 0x07)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  }
}

CharClass charClass(uint32_t cpt) {
  CharClass c;
  c.whitespace = isWhitespace(cpt);
  if (cpt < 0x80) {  // fast path, identical to ICU's answers for ASCII
    c.letter = (cpt >= 'A' && cpt <= 'Z') || (cpt >= 'a' && cpt <= 'z');
    c.number = cpt >= '0' && cpt <= '9';
    c.punctuation = (cpt >= 0x21 && cpt <= 0x23) || (cpt >= 0x25 && cpt <= 0x2A) ||
                    (cpt >= 0x2C && cpt <= 0x2F) || cpt == 0x3A || cpt == 0x3B || cpt == 0x3F ||
                    cpt == 0x40 || (cpt >= 0x5B && cpt <= 0x5D) || cpt == 0x5F || cpt == 0x7B ||
                    cpt == 0x7D;
    return c;
  }
  if (cpt > 0x10FFFF) return c;
  const uint32_t mask = U_GET_GC_MASK(static_cast<UChar32>(cpt));
  c.letter = (mask & U_GC_L_MASK) != 0;
  c.number = (mask & U_GC_N_MASK) != 0;
  c.punctuation = (mask & U_GC_P_MASK) != 0;
  return c;
}

const std::string& byteToUtf8(uint8_t byte) {
  return byteAlphabet().to_utf8[byte];
}

int utf8CodepointToByte(uint32_t cpt) {
  const auto& a = byteAlphabet();
  return cpt < a.from_cpt.size() ? a.from_cpt[cpt] : -1;
}

}  // namespace tpnode::model
