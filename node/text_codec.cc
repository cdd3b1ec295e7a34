#include "node/text_codec.h"

namespace tpnode::node {

// SEAM: return a TextCodec wrapping model/tokenizer once that lands on main.
std::unique_ptr<TextCodec> makeTextCodec(const model::GgufMetadata&) {
  return nullptr;
}

}  // namespace tpnode::node
