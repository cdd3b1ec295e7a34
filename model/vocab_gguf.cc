#include "model/vocab_gguf.h"

namespace tpnode::model {
namespace {

std::optional<int64_t> optionalInt(const GgufMetadata& m, std::string_view key) {
  if (!m.has(key)) return std::nullopt;
  return m.getInt(key);
}

std::optional<bool> optionalBool(const GgufMetadata& m, std::string_view key) {
  if (!m.has(key)) return std::nullopt;
  return m.getBool(key);
}

}  // namespace

Vocab loadVocab(const GgufMetadata& m) {
  Vocab v;
  v.model = m.getString("tokenizer.ggml.model");
  v.pre = m.getStringOr("tokenizer.ggml.pre", "");
  v.tokens = m.getStringArray("tokenizer.ggml.tokens");
  if (m.has("tokenizer.ggml.scores")) v.scores = m.getFloatArray("tokenizer.ggml.scores");
  if (m.has("tokenizer.ggml.token_type")) {
    for (const int64_t t : m.getIntArray("tokenizer.ggml.token_type")) {
      v.token_types.push_back(static_cast<int32_t>(t));  // unknown values become "undefined"
    }
  }
  if (m.has("tokenizer.ggml.merges")) v.merges = m.getStringArray("tokenizer.ggml.merges");
  v.bos_id = optionalInt(m, "tokenizer.ggml.bos_token_id");
  v.eos_id = optionalInt(m, "tokenizer.ggml.eos_token_id");
  v.unk_id = optionalInt(m, "tokenizer.ggml.unknown_token_id");
  v.sep_id = optionalInt(m, "tokenizer.ggml.seperator_token_id");
  v.pad_id = optionalInt(m, "tokenizer.ggml.padding_token_id");
  v.eot_id = optionalInt(m, "tokenizer.ggml.eot_token_id");
  v.eom_id = optionalInt(m, "tokenizer.ggml.eom_token_id");
  v.add_bos = optionalBool(m, "tokenizer.ggml.add_bos_token");
  v.add_eos = optionalBool(m, "tokenizer.ggml.add_eos_token");
  v.add_space_prefix = optionalBool(m, "tokenizer.ggml.add_space_prefix");
  v.chat_template = m.getStringOr("tokenizer.chat_template", "");
  return v;
}

Vocab loadVocab(const GgufFile& file) {
  return loadVocab(file.metadata());
}

}  // namespace tpnode::model
