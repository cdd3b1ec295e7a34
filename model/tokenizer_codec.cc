// Tokenizer::encode and Tokenizer::decode: special-token partitioning, the SentencePiece space
// prefix, BOS/EOS, and llama_detokenize's space clean-up.
#include "common/error.h"
#include "model/tokenizer.h"
#include "model/tokenizer_internal.h"

namespace tpnode::model {
namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581 "▁"

struct Fragment {
  TokenId token;  // -1: raw text [offset, offset + length) of the input
  size_t offset;
  size_t length;
};

// llama.cpp's tokenizer_st_partition: cut the text at every occurrence of a special token's
// text, longest tokens first, leftmost occurrences first. Control and unknown tokens are only
// matched if parse_special; user-defined tokens always.
std::vector<Fragment> partition(const TokenizerTables& t, std::string_view text,
                                bool parse_special) {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back(Fragment{-1, 0, text.size()});
  std::vector<Fragment> next;
  for (const TokenId id : t.special_by_size) {
    if (!parse_special && (t.attr[id] & (kAttrControl | kAttrUnknown))) continue;
    const std::string_view tok = t.text[id];
    next.clear();
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      const std::string_view raw = text.substr(f.offset, f.length);
      size_t pos = 0;
      for (size_t hit; (hit = raw.find(tok, pos)) != std::string_view::npos;
           pos = hit + tok.size()) {
        if (hit > pos) next.push_back(Fragment{-1, f.offset + pos, hit - pos});
        next.push_back(Fragment{id, 0, 0});
      }
      if (pos < raw.size()) next.push_back(Fragment{-1, f.offset + pos, raw.size() - pos});
    }
    frags.swap(next);
  }
  return frags;
}

// llama_detokenize's clean_spaces passes, ported as they are (in place on `s`).
void cleanSpaces(std::string& s) {
  char* text = s.data();
  const auto n = static_cast<int64_t>(s.size());
  // " ?", " !", " .", " ," lose the space.
  int64_t total = n ? 1 : 0;
  for (int64_t i = 1; i < n; ++i) {
    const char x = text[i];
    if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
    text[total++] = x;
  }
  // " ' " loses both spaces.
  const int64_t total2 = total;
  total = total ? 1 : 0;
  for (int64_t i = 1; i < total2; ++i) {
    const char x = text[i];
    if (x == '\'' && i + 1 < total2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
      --total;
      text[++i] = '\0';
    }
    text[total++] = x;
  }
  // " 's", " 'm", " 're", " 've" lose the space.
  const int64_t total3 = total;
  total = total ? 1 : 0;
  for (int64_t i = 1; i < total3; ++i) {
    const char x = text[i];
    if (text[i - 1] == ' ' && x == '\'' && i + 1 < total3) {
      const char x1 = text[i + 1];
      if (x1 == 's' || x1 == 'm') {
        --total;
      } else if (x1 != 't' && x1 != 'd' && i + 2 < total3) {
        const char x2 = text[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) --total;
      }
    }
    text[total++] = x;
  }
  s.resize(static_cast<size_t>(total));
}

}  // namespace

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  const TokenizerTables& t = *t_;
  std::vector<TokenId> out;
  const std::vector<Fragment> frags = partition(t, text, parse_special);
  if (add_special && t.add_bos) out.push_back(t.bos);
  if (t.spm) {
    bool prev_special = true;  // the text's start counts as after a special token
    std::string escaped;       // the fragment with spaces as "▁"
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        out.push_back(f.token);
        prev_special = true;
        continue;
      }
      escaped.clear();
      if (t.add_space_prefix && prev_special) escaped.append(kSpmSpace);
      for (const char c : text.substr(f.offset, f.length)) {
        if (c == ' ') {
          escaped.append(kSpmSpace);
        } else {
          escaped.push_back(c);
        }
      }
      encodeSpm(t, escaped, out);
      prev_special = false;
    }
  } else {
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        out.push_back(f.token);
      } else {
        encodeBpe(t, text.substr(f.offset, f.length), out);
      }
    }
  }
  if (add_special && t.add_eos) out.push_back(t.eos);
  return out;
}

std::string Tokenizer::decode(std::span<const TokenId> ids, bool remove_special,
                              bool unparse_special) const {
  const TokenizerTables& t = *t_;
  for (const TokenId id : ids) checkId(id);
  bool remove_space = t.add_space_prefix;
  if (remove_special && t.add_bos && !ids.empty() && ids.front() == t.bos) {
    remove_space = false;
    ids = ids.subspan(1);
  }
  if (remove_special && t.add_eos && !ids.empty() && ids.back() == t.eos) {
    ids = ids.first(ids.size() - 1);
  }
  std::string out;
  for (const TokenId id : ids) {
    if (!unparse_special && (t.attr[id] & (kAttrUnknown | kAttrControl))) {
      remove_space = false;
      continue;
    }
    std::string_view piece = t.piece[id];
    if (remove_space && !piece.empty() && piece.front() == ' ') piece.remove_prefix(1);
    remove_space = false;
    out.append(piece);
  }
  if (t.clean_spaces) cleanSpaces(out);
  return out;
}

}  // namespace tpnode::model
