#include "node/text_codec.h"

#include "model/tokenizer.h"
#include "model/vocab_gguf.h"

namespace tpnode::node {
namespace {

// The model's own tokenizer: BOS/EOS as the vocab asks, special-token texts parsed (as
// llama.cpp's CLI does for a prompt).
class TokenizerCodec final : public TextCodec {
 public:
  explicit TokenizerCodec(const model::GgufMetadata& meta) : tok_(model::loadVocab(meta)) {}
  std::vector<int32_t> encode(std::string_view text) const override {
    return tok_.encode(text, /*add_special=*/true, /*parse_special=*/true);
  }
  std::string decode(std::span<const int32_t> ids) const override { return tok_.decode(ids); }

 private:
  model::Tokenizer tok_;
};

}  // namespace

std::unique_ptr<TextCodec> makeTextCodec(const model::GgufMetadata& meta) {
  if (!meta.has("tokenizer.ggml.model")) return nullptr;  // ids only
  return std::make_unique<TokenizerCodec>(meta);
}

}  // namespace tpnode::node
