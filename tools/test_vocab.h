// Tokenizer vocabularies for the generated test models (tools/test_model.h), written into a GGUF
// as llama.cpp reads them. Deterministic: the learned kinds train byte-pair merges on a fixed
// English text compiled into the tool, so every platform writes the same tokens.
//   kLetters: the original small SentencePiece-style list: <unk> <s> </s>, the 256 byte tokens,
//             "▁", then letter strings in a fixed order (scores = minus the id).
//   kSpm:     tokenizer.ggml.model "llama": <unk> <s> </s>, byte tokens <0x00>..<0xFF>, "▁",
//             printable ASCII, é ü ö ä ß — €, then pieces learned by merges on the text (words
//             prefixed with "▁"), scored minus their id. BOS is added; other characters fall
//             back to byte tokens.
//   kBpe:     tokenizer.ggml.model "gpt2", pre "qwen2": ids 0-255 are the bytes in GPT-2's
//             byte-to-unicode alphabet, then merged tokens (tokenizer.ggml.merges by rank), then
//             <|endoftext|> (bos = eos = pad) <|im_start|> <|im_end|> as control tokens. No BOS.
#pragma once

#include <cstdint>
#include <string>

#include "model/gguf_writer.h"

namespace tpnode::tools {

enum class TestVocab { kLetters, kSpm, kBpe };

// "letters", "spm", "bpe"; Error(kInvalidArgument) otherwise.
TestVocab parseTestVocab(const std::string& name);

// Writes the tokenizer.* keys for `n` tokens. Error(kInvalidArgument) when n is too small for
// the kind (260 for kLetters and kSpm's fixed part, 259 for kBpe) or larger than the merges the
// text allows.
void addTestVocab(model::GgufWriter& w, TestVocab kind, int64_t n);

}  // namespace tpnode::tools
