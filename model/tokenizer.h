// Tokenizer: text <-> token ids with llama.cpp's exact results (llama_tokenize,
// llama_token_to_piece, llama_detokenize at c392e50).
//
// Contract
// - Built once from a Vocab (model/vocab.h); the constructor validates it (hostile bytes) and
//   throws Error(kInvalidData) for a malformed vocabulary, Error(kUnsupported) for a tokenizer
//   kind or pre-tokenizer it does not implement, naming the value.
// - Kinds: "llama" = SentencePiece (score-ordered bigram merges, "▁" for spaces, <0xXX> byte
//   fallback, a space prefix); "gpt2" = byte-level BPE (GPT-2 byte alphabet, merges by rank,
//   pre-tokenizers of model/pretokenizer.h).
// - Immutable after construction: every method is const and safe to call from many threads.
// - Ids passed in are checked: an id outside [0, nVocab()) is Error(kInvalidArgument).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/vocab.h"

namespace tpnode::model {

struct TokenizerTables;  // model/tokenizer_internal.h

class Tokenizer {
 public:
  explicit Tokenizer(const Vocab& vocab);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // llama_tokenize(text, add_special, parse_special). add_special adds BOS/EOS where the vocab
  // asks for them; parse_special turns control-token texts ("<|im_start|>") into their ids
  // (user-defined tokens are always matched, as in llama.cpp).
  std::vector<TokenId> encode(std::string_view text, bool add_special, bool parse_special) const;

  // llama_token_to_piece(id, lstrip, special): the bytes of one token. Control and unknown
  // tokens render as their text if `special`, else as nothing; lstrip removes up to that many
  // leading spaces.
  std::string tokenToPiece(TokenId id, bool special = true, int lstrip = 0) const;

  // llama_detokenize(ids, remove_special, unparse_special): the text of a sequence (with
  // SentencePiece's leading space removed and, for some BPE vocabs, spaces cleaned up).
  std::string decode(std::span<const TokenId> ids, bool remove_special = false,
                     bool unparse_special = false) const;

  int32_t nVocab() const;
  bool isSpm() const;
  TokenId bos() const;  // -1 if none
  TokenId eos() const;  // -1 if none
  bool addBos() const;
  bool addEos() const;
  // End of generation: EOS, EOT (<|eot_id|>, <|im_end|>, <end_of_turn>, ...), EOM.
  bool isEog(TokenId id) const;
  // Control or unknown token (rendered as nothing unless asked for).
  bool isControl(TokenId id) const;
  // The token's text as stored in the vocabulary; "" if out of range.
  std::string_view tokenText(TokenId id) const;

 private:
  void checkId(TokenId id) const;

  std::unique_ptr<TokenizerTables> t_;
};

}  // namespace tpnode::model
