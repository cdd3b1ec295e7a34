// Unicode helpers for the tokenizers, with llama.cpp's semantics (src/unicode.cpp, c392e50).
//
// Contract
// - Pure functions, thread-safe, no global state beyond immutable tables.
// - decodeUtf8 never throws: each byte that does not start a well-formed sequence becomes
//   U+FFFD and decoding resumes at the next byte (llama.cpp's unicode_cpts_from_utf8; like it,
//   overlong forms and surrogates are accepted as they are).
// - Character classes (letter \p{L}, number \p{N}, punctuation \p{P}, whitespace) come from
//   ICU's general categories; whitespace is llama.cpp's fixed set (Unicode White_Space).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tpnode::model {

// Length of the UTF-8 sequence that starts with `lead`, by its high nibble (1 for a
// continuation byte), as llama.cpp's unicode_len_utf8.
size_t utf8SequenceLength(uint8_t lead);

// Code points of `text`; invalid bytes become U+FFFD (see contract).
void decodeUtf8(std::string_view text, std::vector<uint32_t>& out);

// Appends the UTF-8 encoding of `cpt` (any value below 0x110000) to `out`.
void appendUtf8(uint32_t cpt, std::string& out);

struct CharClass {
  bool letter = false;       // \p{L}
  bool number = false;       // \p{N}
  bool punctuation = false;  // \p{P}
  bool whitespace = false;   // \s (Unicode White_Space)
};

CharClass charClass(uint32_t cpt);

// GPT-2's reversible byte <-> code point alphabet: printable Latin-1 bytes map to themselves,
// the others to U+0100 and up. byteToUtf8(b) is the UTF-8 of that code point.
const std::string& byteToUtf8(uint8_t byte);
// The byte whose alphabet code point is `cpt`, or -1 if `cpt` is not in the alphabet.
int utf8CodepointToByte(uint32_t cpt);

}  // namespace tpnode::model
