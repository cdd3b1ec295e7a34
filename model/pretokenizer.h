// Pre-tokenizers of byte-level BPE vocabularies: split text into words before merging, with the
// exact results of llama.cpp (c392e50) for each supported tokenizer.ggml.pre type.
//
// Contract
// - Pure functions, thread-safe. The regexes are implemented by hand (no std::regex); the
//   character classes come from model/unicode.h.
// - Supported: llama3 (Llama 3: "llama3", "llama-v3", "llama-bpe", "falcon3"),
//   qwen2 ("qwen2", "deepseek-r1-qwen"), gpt2 ("gpt-2", "phi-2", "roberta-bpe", "mpt", "olmo",
//   jina-*, ...), starcoder (digits one by one, then gpt2: "starcoder", "refact",
//   "command-r", "smollm", ...), falcon, default ("" or "default": llama.cpp's chain of four
//   regexes). Any other name is Error(kUnsupported) naming it.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "model/unicode.h"

namespace tpnode::model {

enum class PreTokenizer { kDefault, kGpt2, kLlama3, kQwen2, kStarcoder, kFalcon };

// Maps a tokenizer.ggml.pre value to its pre-tokenizer; throws Error(kUnsupported).
PreTokenizer preTokenizerFromName(std::string_view name);

// Splits the code points `cpts` into words. `classes` holds charClass() of each code point.
// Appends each word's length in code points to `lengths` (cleared first); they sum to
// cpts.size() and none is zero.
void splitWords(PreTokenizer pre, std::span<const uint32_t> cpts,
                std::span<const CharClass> classes, std::vector<size_t>& lengths);

}  // namespace tpnode::model
