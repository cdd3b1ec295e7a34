// Reads a Vocab (model/vocab.h) from the tokenizer.ggml.* keys of a GGUF file.
//
// Contract
// - Pure: copies what it needs out of the metadata; the result does not refer to the file.
// - Throws Error(kInvalidData) naming the key when tokenizer.ggml.model or
//   tokenizer.ggml.tokens is missing or a key has the wrong type. Values are not checked here;
//   Tokenizer's constructor does that.
#pragma once

#include "model/gguf.h"
#include "model/vocab.h"

namespace tpnode::model {

Vocab loadVocab(const GgufMetadata& metadata);
Vocab loadVocab(const GgufFile& file);

}  // namespace tpnode::model
