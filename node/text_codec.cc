#include "node/text_codec.h"

#include "common/error.h"
#include "common/log.h"
#include "model/tokenizer.h"
#include "model/vocab_gguf.h"

namespace tpnode::node {
namespace {

// The model's tokenizer with llama.cpp's CLI defaults: BOS/EOS as the vocabulary asks, special
// token texts in the prompt left as text; detokenization keeps special tokens as nothing.
class TokenizerCodec final : public TextCodec {
 public:
  explicit TokenizerCodec(model::Tokenizer tokenizer) : tokenizer_(std::move(tokenizer)) {}
  std::vector<int32_t> encode(std::string_view text) const override {
    return tokenizer_.encode(text, /*add_special=*/true, /*parse_special=*/false);
  }
  std::string decode(std::span<const int32_t> ids) const override {
    return tokenizer_.decode(ids, /*remove_special=*/false, /*unparse_special=*/false);
  }

 private:
  model::Tokenizer tokenizer_;
};

}  // namespace

std::unique_ptr<TextCodec> makeTextCodec(const model::GgufMetadata& meta) {
  try {
    return std::make_unique<TokenizerCodec>(model::Tokenizer(model::loadVocab(meta)));
  } catch (const Error& e) {
    spdlog::warn("[model] no tokenizer ({}): only --prompt-ids works, output shows ids", e.what());
    return nullptr;
  }
}

}  // namespace tpnode::node
