// Vocab: a tokenizer's vocabulary as plain data, independent of where it was read from.
//
// Contract
// - A value type filled by a loader (model/vocab_gguf.cc reads the tokenizer.ggml.* keys of a
//   GGUF file) or by hand in tests. It holds the raw metadata: optional fields are unset when
//   the key is absent, and the Tokenizer applies llama.cpp's defaults for the model kind.
// - Nothing here is validated; Tokenizer's constructor checks it (the bytes may be hostile).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tpnode::model {

using TokenId = int32_t;

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct Vocab {
  std::string model;  // tokenizer.ggml.model: "llama" (SentencePiece) or "gpt2" (byte-level BPE)
  std::string pre;  // tokenizer.ggml.pre: "llama3", "qwen2", "gpt-2", "default", ... ("" if absent)
  std::vector<std::string> tokens;   // tokenizer.ggml.tokens: token id -> its text
  std::vector<float> scores;         // tokenizer.ggml.scores (empty: all 0)
  std::vector<int32_t> token_types;  // tokenizer.ggml.token_type (empty: all normal)
  std::vector<std::string> merges;   // tokenizer.ggml.merges, "left right", by rank (BPE)

  std::optional<int64_t> bos_id;  // tokenizer.ggml.bos_token_id
  std::optional<int64_t> eos_id;  // tokenizer.ggml.eos_token_id
  std::optional<int64_t> unk_id;  // tokenizer.ggml.unknown_token_id
  std::optional<int64_t> sep_id;  // tokenizer.ggml.seperator_token_id (sic)
  std::optional<int64_t> pad_id;  // tokenizer.ggml.padding_token_id
  std::optional<int64_t> eot_id;  // tokenizer.ggml.eot_token_id
  std::optional<int64_t> eom_id;  // tokenizer.ggml.eom_token_id

  std::optional<bool> add_bos;           // tokenizer.ggml.add_bos_token
  std::optional<bool> add_eos;           // tokenizer.ggml.add_eos_token
  std::optional<bool> add_space_prefix;  // tokenizer.ggml.add_space_prefix

  std::string chat_template;  // tokenizer.chat_template ("" if absent)
};

}  // namespace tpnode::model
