#include "model/tokenizer.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "common/log.h"
#include "model/tokenizer_internal.h"
#include "model/unicode.h"

namespace tpnode::model {
namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581 "▁"

void replaceAll(std::string& s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out.append(to);
  }
  out.append(s, pos, std::string::npos);
  s.swap(out);
}

uint32_t attrOfType(int32_t type) {
  switch (static_cast<TokenType>(type)) {
    case TokenType::kNormal:
      return kAttrNormal;
    case TokenType::kUnknown:
      return kAttrUnknown;
    case TokenType::kControl:
      return kAttrControl;
    case TokenType::kUserDefined:
      return kAttrUserDefined;
    case TokenType::kUnused:
      return kAttrUnused;
    case TokenType::kByte:
      return kAttrByte;
    case TokenType::kUndefined:
      return kAttrUndefined;
  }
  return kAttrUndefined;
}

// "<0xAB>" -> 0xAB, parsing like llama.cpp's strtol(text.substr(3, 2), 16).
uint8_t byteOfToken(std::string_view text) {
  unsigned value = 0;
  for (size_t i = 3; i < std::min<size_t>(text.size(), 5); ++i) {
    const char c = text[i];
    const int d = (c >= '0' && c <= '9')   ? c - '0'
                  : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                  : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                           : -1;
    if (d < 0) break;
    value = value * 16 + static_cast<unsigned>(d);
  }
  return static_cast<uint8_t>(value);
}

// llama.cpp's llama_decode_text: alphabet code points back to bytes.
std::string bpeDecodeText(const std::string& text) {
  std::vector<uint32_t> cpts;
  decodeUtf8(text, cpts);
  std::string out;
  for (const uint32_t cpt : cpts) {
    const int byte = utf8CodepointToByte(cpt);
    if (byte >= 0) {
      out.push_back(static_cast<char>(byte));
      continue;
    }
    std::string utf8;
    appendUtf8(cpt, utf8);
    out += "[UNK_BYTE_0x";
    for (const char c : utf8) out += fmt::format("{:02x}", static_cast<uint8_t>(c));
    out += text + "]";
  }
  return out;
}

// The piece of a token as llama_token_to_piece(id, lstrip = 0, special = true).
std::string renderPiece(const TokenizerTables& t, TokenId id) {
  const uint32_t attr = t.attr[id];
  const std::string& text = t.text[id];
  if (attr & (kAttrUnknown | kAttrControl | kAttrUserDefined)) return text;
  if (attr & kAttrNormal) {
    if (!t.spm) return bpeDecodeText(text);
    std::string s = text;
    replaceAll(s, kSpmSpace, " ");
    return s;
  }
  if (t.spm && (attr & kAttrByte)) return std::string(1, static_cast<char>(byteOfToken(text)));
  return {};
}

// A special-token id from the metadata; one outside the vocabulary is ignored with a warning
// (llama.cpp keeps its default then; real files carry such ids, e.g. a padding id = n_vocab).
std::optional<TokenId> checkedId(const std::optional<int64_t>& id, std::string_view key,
                                 size_t n_tokens) {
  if (!id) return std::nullopt;
  if (*id < 0 || static_cast<uint64_t>(*id) >= n_tokens) {
    spdlog::warn("[tokenizer] tokenizer.ggml.{} = {} is outside the vocabulary [0, {}); ignored",
                 key, *id, n_tokens);
    return std::nullopt;
  }
  return static_cast<TokenId>(*id);
}

}  // namespace

int32_t TokenizerTables::rank(std::string_view left, std::string_view right,
                              std::string& key) const {
  mergeKey(left, right, key);
  const auto it = merge_rank.find(key);
  return it == merge_rank.end() ? -1 : it->second;
}

void mergeKey(std::string_view left, std::string_view right, std::string& key) {
  const auto n = static_cast<uint32_t>(left.size());
  key.assign(reinterpret_cast<const char*>(&n), sizeof(n));
  key.append(left);
  key.append(right);
}

Tokenizer::Tokenizer(const Vocab& v) : t_(std::make_unique<TokenizerTables>()) {
  TokenizerTables& t = *t_;
  const size_t n = v.tokens.size();
  if (n == 0) fail(ErrorCode::kInvalidData, "tokenizer.ggml.tokens is empty");
  if (n > static_cast<size_t>(INT32_MAX)) {
    fail(ErrorCode::kInvalidData, "tokenizer.ggml.tokens has {} entries", n);
  }
  if (!v.scores.empty() && v.scores.size() != n) {
    fail(ErrorCode::kInvalidData, "tokenizer.ggml.scores has {} entries for {} tokens",
         v.scores.size(), n);
  }
  if (!v.token_types.empty() && v.token_types.size() != n) {
    fail(ErrorCode::kInvalidData, "tokenizer.ggml.token_type has {} entries for {} tokens",
         v.token_types.size(), n);
  }

  // Kind and its defaults (llama.cpp llama_vocab::impl::load).
  TokenId bos = -1, eos = -1, unk = -1;
  if (v.model == "llama") {
    t.spm = true;
    bos = 1, eos = 2, unk = 0;
    t.add_space_prefix = true;
    t.add_bos = true;
  } else if (v.model == "gpt2") {
    t.spm = false;
    bos = 11, eos = 11;
    t.pre = preTokenizerFromName(v.pre);
    t.clean_spaces = t.pre != PreTokenizer::kQwen2 && v.pre != "command-r";
    if (t.pre == PreTokenizer::kLlama3) {
      t.ignore_merges = true;
      t.add_bos = true;
    }
  } else {
    fail(ErrorCode::kUnsupported,
         "tokenizer.ggml.model '{}' is not supported (supported: llama, gpt2)", v.model);
  }
  if (v.add_space_prefix) t.add_space_prefix = *v.add_space_prefix;
  if (v.add_bos) t.add_bos = *v.add_bos;
  if (v.add_eos) t.add_eos = *v.add_eos;
  const auto defaultId = [&](TokenId id) { return static_cast<size_t>(id) < n ? id : -1; };
  t.bos = checkedId(v.bos_id, "bos_token_id", n).value_or(defaultId(bos));
  t.eos = checkedId(v.eos_id, "eos_token_id", n).value_or(defaultId(eos));
  t.unk = checkedId(v.unk_id, "unknown_token_id", n).value_or(defaultId(unk));
  t.eot = checkedId(v.eot_id, "eot_token_id", n).value_or(-1);
  t.eom = checkedId(v.eom_id, "eom_token_id", n).value_or(-1);
  checkedId(v.sep_id, "seperator_token_id", n);
  checkedId(v.pad_id, "padding_token_id", n);
  if (t.add_bos && t.bos < 0) fail(ErrorCode::kInvalidData, "add_bos_token set but no BOS token");
  if (t.add_eos && t.eos < 0) fail(ErrorCode::kInvalidData, "add_eos_token set but no EOS token");

  t.text = v.tokens;
  t.score = v.scores.empty() ? std::vector<float>(n, 0.0f) : v.scores;
  t.attr.resize(n);
  t.token_to_id.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    t.attr[i] = v.token_types.empty() ? kAttrNormal : attrOfType(v.token_types[i]);
    t.token_to_id[t.text[i]] = static_cast<TokenId>(i);  // a later duplicate wins, as llama.cpp
  }

  if (!t.spm) {
    t.merge_rank.reserve(v.merges.size());
    std::string key;
    for (size_t i = 0; i < v.merges.size(); ++i) {
      const std::string& m = v.merges[i];
      const size_t space = m.find(' ', 1);
      if (space == std::string::npos) {
        fail(ErrorCode::kInvalidData, "tokenizer.ggml.merges[{}] '{}' has no space", i, m);
      }
      mergeKey(std::string_view(m).substr(0, space), std::string_view(m).substr(space + 1), key);
      t.merge_rank.emplace(key, static_cast<int32_t>(i));  // the first rank wins, as llama.cpp
    }
  }

  // End-of-generation tokens by text (llama.cpp's workaround), promoted to control tokens.
  static constexpr std::string_view kEotTexts[] = {"<|eot_id|>",
                                                   "<|im_end|>",
                                                   "<|end|>",
                                                   "<end_of_turn>",
                                                   "<|endoftext|>",
                                                   "<EOT>",
                                                   "<\xEF\xBD\x9C"
                                                   "end\xE2\x96\x81"
                                                   "of\xE2\x96\x81"
                                                   "sentence\xEF\xBD\x9C>"};
  static constexpr std::string_view kEogTexts[] = {"<|eot_id|>",    "<|im_end|>",    "<|end|>",
                                                   "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
                                                   "<EOT>"};
  if (t.eot < 0) {
    for (const auto text : kEotTexts) {
      if (const TokenId id = t.find(text); id >= 0 && t.eot < 0) t.eot = id;
    }
  }
  if (t.eom < 0) t.eom = t.find("<|eom_id|>");
  for (const auto text : kEogTexts) {
    if (const TokenId id = t.find(text); id >= 0) t.eog.insert(id);
  }
  for (const TokenId id : {t.eot, t.eom}) {
    if (id >= 0) t.attr[id] = kAttrControl;
  }
  for (const TokenId id : t.eog) t.attr[id] = kAttrControl;
  for (const TokenId id : {t.eos, t.eot, t.eom}) {
    if (id >= 0) t.eog.insert(id);
  }

  for (size_t i = 0; i < n; ++i) {
    if ((t.attr[i] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) && !t.text[i].empty()) {
      t.special_by_size.push_back(static_cast<TokenId>(i));
    }
  }
  std::stable_sort(t.special_by_size.begin(), t.special_by_size.end(),
                   [&](TokenId a, TokenId b) { return t.text[a].size() > t.text[b].size(); });

  t.piece.resize(n);
  for (size_t i = 0; i < n; ++i) t.piece[i] = renderPiece(t, static_cast<TokenId>(i));
}

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

int32_t Tokenizer::nVocab() const {
  return static_cast<int32_t>(t_->text.size());
}
bool Tokenizer::isSpm() const {
  return t_->spm;
}
TokenId Tokenizer::bos() const {
  return t_->bos;
}
TokenId Tokenizer::eos() const {
  return t_->eos;
}
bool Tokenizer::addBos() const {
  return t_->add_bos;
}
bool Tokenizer::addEos() const {
  return t_->add_eos;
}

bool Tokenizer::isEog(TokenId id) const {
  return t_->eog.count(id) != 0;
}

bool Tokenizer::isControl(TokenId id) const {
  return id >= 0 && id < nVocab() && (t_->attr[id] & (kAttrControl | kAttrUnknown)) != 0;
}

std::string_view Tokenizer::tokenText(TokenId id) const {
  return id >= 0 && id < nVocab() ? std::string_view(t_->text[id]) : std::string_view();
}

void Tokenizer::checkId(TokenId id) const {
  if (id < 0 || id >= nVocab()) {
    fail(ErrorCode::kInvalidArgument, "token id {} is outside the vocabulary [0, {})", id,
         nVocab());
  }
}

std::string Tokenizer::tokenToPiece(TokenId id, bool special, int lstrip) const {
  checkId(id);
  if (!special && (t_->attr[id] & (kAttrUnknown | kAttrControl))) return {};
  std::string_view piece = t_->piece[id];
  for (int i = 0; i < lstrip && !piece.empty() && piece.front() == ' '; ++i) {
    piece.remove_prefix(1);
  }
  return std::string(piece);
}

}  // namespace tpnode::model
