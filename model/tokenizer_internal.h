// Internal to the tokenizer (tokenizer*.cc): the validated tables and the two merge algorithms.
// Not part of model/'s interface.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "model/pretokenizer.h"
#include "model/vocab.h"

namespace tpnode::model {

// llama.cpp's llama_token_attr bits.
enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

struct TokenizerTables {
  bool spm = true;
  PreTokenizer pre = PreTokenizer::kDefault;
  bool ignore_merges = false;     // llama3: a word that is a whole token skips merging
  bool clean_spaces = false;      // detokenize removes " ." " ," " 's" ... (BPE but qwen2)
  bool add_space_prefix = false;  // SPM: " " before the text
  bool add_bos = false;
  bool add_eos = false;
  TokenId bos = -1, eos = -1, unk = -1, eot = -1, eom = -1;

  std::vector<std::string> text;
  std::vector<float> score;
  std::vector<uint32_t> attr;
  std::vector<std::string> piece;        // token_to_piece(id, lstrip 0, special) cache
  std::vector<TokenId> special_by_size;  // control/user-defined/unknown, longest text first
  std::unordered_set<TokenId> eog;
  StringMap token_to_id;
  StringMap merge_rank;  // key: mergeKey(left, right)

  // Id of the token whose text is exactly `s`, or -1.
  TokenId find(std::string_view s) const {
    const auto it = token_to_id.find(s);
    return it == token_to_id.end() ? -1 : it->second;
  }
  // Rank of the merge (left, right), or -1. `key` is scratch space.
  int32_t rank(std::string_view left, std::string_view right, std::string& key) const;
};

// The key of a merge: left's length (4 bytes), then left and right; unambiguous for any bytes.
void mergeKey(std::string_view left, std::string_view right, std::string& key);

// Appends the SentencePiece tokens of `text` (spaces already escaped as "▁") to `out`.
void encodeSpm(const TokenizerTables& t, std::string_view text, std::vector<TokenId>& out);
// Appends the byte-level BPE tokens of raw `text` (pre-tokenized here) to `out`.
void encodeBpe(const TokenizerTables& t, std::string_view text, std::vector<TokenId>& out);

}  // namespace tpnode::model
