// Utf8Assembler: turns a stream of token pieces (arbitrary bytes; one UTF-8 character may be split
// across tokens) into text made only of complete, valid UTF-8 sequences.
//
// Contract
// - push() returns the longest prefix of (held bytes + piece) that ends on a character
//   boundary; the bytes of an unfinished character (at most 3) are held for the next push.
// - Bytes that can never form a valid sequence (stray continuation bytes, overlong forms,
//   surrogates, > U+10FFFF) become U+FFFD, one per maximal invalid subpart, as browsers do.
// - finish() returns the held bytes of an unfinished character as U+FFFD (or "" when none).
// - Not thread-safe: one per generation, used by one connection.
#pragma once

#include <string>
#include <string_view>

namespace tpnode::node::api {

class Utf8Assembler {
 public:
  std::string push(std::string_view piece);
  std::string finish();

 private:
  std::string held_;
};

// True when `text` is valid UTF-8.
bool isValidUtf8(std::string_view text);

}  // namespace tpnode::node::api
