// TextCodec: the seam between the one-process CLI and the tokenizer (model/tokenizer*).
// makeTextCodec() returns nullptr when the model has no usable tokenizer; the CLI then accepts
// only --prompt-ids and prints generated ids without text.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/gguf.h"

namespace tpnode::node {

class TextCodec {
 public:
  virtual ~TextCodec() = default;
  // Prompt text -> token ids, with the model's BOS/special-token rules.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // Token ids -> bytes (may be invalid UTF-8 for partial byte tokens).
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
};

// The model's tokenizer, or nullptr when none is available (not yet connected).
std::unique_ptr<TextCodec> makeTextCodec(const model::GgufMetadata& meta);

}  // namespace tpnode::node
