#include "model/pretokenizer.h"

#include <array>
#include <string>

#include "common/error.h"

namespace tpnode::model {
namespace {

constexpr uint32_t kOutOfRange = 0xFFFFFFFF;

// One segment [begin, end) of the text being split; the scanner sees nothing outside it, as
// llama.cpp's custom splitters see only their offset range.
class Segment {
 public:
  Segment(std::span<const uint32_t> cpts, std::span<const CharClass> classes, size_t begin,
          size_t end, std::vector<size_t>& out)
      : cpts_(cpts), classes_(classes), begin_(begin), end_(end), prev_end_(begin), out_(out) {}

  size_t begin() const { return begin_; }
  size_t end() const { return end_; }
  bool inside(size_t pos) const { return pos >= begin_ && pos < end_; }
  uint32_t cpt(size_t pos) const { return inside(pos) ? cpts_[pos] : kOutOfRange; }
  // Class of the code point at pos; all false outside the segment (check inside()).
  CharClass cls(size_t pos) const { return inside(pos) ? classes_[pos] : CharClass{}; }

  // Emits the word [prev_end, end) if non-empty; returns its length.
  size_t emit(size_t end) {
    const size_t len = end - prev_end_;
    if (len > 0) out_.push_back(len);
    prev_end_ = end;
    return len;
  }

 private:
  std::span<const uint32_t> cpts_;
  std::span<const CharClass> classes_;
  size_t begin_, end_, prev_end_;
  std::vector<size_t>& out_;
};

uint32_t asciiLower(uint32_t c) {
  return (c >= 'A' && c <= 'Z') ? c + 32 : c;
}

// 's|'t|'re|'ve|'m|'ll|'d at pos (case-insensitive if asked); returns the match length or 0.
size_t contraction(const Segment& s, size_t pos, bool ignore_case) {
  if (s.cpt(pos) != '\'' || pos + 1 >= s.end()) return 0;
  const auto low = [&](uint32_t c) { return ignore_case ? asciiLower(c) : c; };
  const uint32_t n1 = low(s.cpt(pos + 1));
  if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') return 2;
  if (pos + 2 >= s.end()) return 0;
  const uint32_t n2 = low(s.cpt(pos + 2));
  if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) return 3;
  return 0;
}

bool isOther(const CharClass& c) {
  return !(c.whitespace || c.letter || c.number);
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
void splitGpt2(Segment& s) {
  for (size_t pos = s.begin(); pos < s.end();) {
    const uint32_t c = s.cpt(pos);
    if (const size_t n = contraction(s, pos, false)) {
      pos += s.emit(pos + n);
      continue;
    }
    const size_t after_space = pos + (c == ' ' ? 1 : 0);
    const CharClass f2 = s.cls(after_space);
    if (f2.letter || f2.number) {
      const bool letter = f2.letter;
      pos = after_space;
      while (letter ? s.cls(pos).letter : s.cls(pos).number) ++pos;
      s.emit(pos);
      continue;
    }
    if (isOther(f2) && s.inside(after_space)) {
      pos = after_space;
      while (isOther(s.cls(pos)) && s.inside(pos)) ++pos;
      s.emit(pos);
      continue;
    }
    size_t n_ws = 0;
    while (s.cls(pos + n_ws).whitespace) ++n_ws;
    if (n_ws > 1 && s.cpt(pos + n_ws) != kOutOfRange) {  // \s+(?!\S)
      pos += n_ws - 1;
      s.emit(pos);
      continue;
    }
    if (n_ws > 0) {
      pos += n_ws;
      s.emit(pos);
      continue;
    }
    s.emit(++pos);
  }
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}|
//  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
void splitLlama3(Segment& s, size_t max_digits) {
  for (size_t pos = s.begin(); pos < s.end();) {
    const uint32_t c = s.cpt(pos);
    const CharClass f = s.cls(pos);
    if (const size_t n = contraction(s, pos, true)) {
      pos += s.emit(pos + n);
      continue;
    }
    if (!(c == '\r' || c == '\n' || f.number) && (f.letter || s.cls(pos + 1).letter)) {
      ++pos;
      while (s.cls(pos).letter) ++pos;
      s.emit(pos);
      continue;
    }
    if (f.number) {
      size_t start = pos;
      while (s.cls(pos).number) {
        if (++pos - start >= max_digits) {
          s.emit(pos);
          start = pos;
        }
      }
      s.emit(pos);
      continue;
    }
    const size_t after_space = pos + (c == ' ' ? 1 : 0);
    if (isOther(s.cls(after_space))) {  // f itself is inside, as llama.cpp's flags.as_uint()
      pos = after_space;
      while (isOther(s.cls(pos)) && s.inside(pos)) ++pos;
      while (s.cpt(pos) == '\r' || s.cpt(pos) == '\n') ++pos;
      s.emit(pos);
      continue;
    }
    size_t n_ws = 0;
    size_t last_crlf_end = 0;
    while (s.cls(pos + n_ws).whitespace) {
      const uint32_t w = s.cpt(pos + n_ws);
      if (w == '\r' || w == '\n') last_crlf_end = pos + n_ws + 1;
      ++n_ws;
    }
    if (last_crlf_end > 0) {  // \s*[\r\n]+
      pos = last_crlf_end;
      s.emit(pos);
      continue;
    }
    if (n_ws > 1 && s.cpt(pos + n_ws) != kOutOfRange) {  // \s+(?!\S)
      pos += n_ws - 1;
      s.emit(pos);
      continue;
    }
    if (n_ws > 0) {
      pos += n_ws;
      s.emit(pos);
      continue;
    }
    s.emit(++pos);
  }
}

// Matches of a pattern become words and so do the gaps between them (llama.cpp's
// unicode_regex_split_stl). `match(pos)` returns the length matched at pos (0: none).
template <typename Match>
void splitByMatches(Segment& s, Match match) {
  for (size_t pos = s.begin(); pos < s.end();) {
    const size_t n = match(pos);
    if (n == 0) {
      ++pos;
      continue;
    }
    s.emit(pos);
    pos += n;
    s.emit(pos);
  }
  s.emit(s.end());
}

// Applies one splitting pass to every segment of `lengths`, replacing it.
template <typename Pass>
void refine(std::span<const uint32_t> cpts, std::span<const CharClass> classes,
            std::vector<size_t>& lengths, std::vector<size_t>& scratch, Pass pass) {
  scratch.clear();
  size_t start = 0;
  for (const size_t len : lengths) {
    Segment s(cpts, classes, start, start + len, scratch);
    pass(s);
    start += len;
  }
  lengths.swap(scratch);
}

size_t punctuationRun(std::span<const uint32_t> cpts, std::span<const CharClass> classes,
                      const Segment& s, size_t pos, bool backtick) {
  size_t end = pos;
  while (end < s.end()) {
    const uint32_t c = cpts[end];
    const bool in = classes[end].punctuation || c == '$' || c == '+' || c == '<' || c == '=' ||
                    c == '>' || c == '^' || c == '~' || c == '|' || (backtick && c == '`');
    if (!in) break;
    ++end;
  }
  return end - pos;
}

size_t threeAsciiDigits(std::span<const uint32_t> cpts, const Segment& s, size_t pos) {
  for (size_t k = 0; k < 3; ++k) {
    if (pos + k >= s.end() || cpts[pos + k] < '0' || cpts[pos + k] > '9') return 0;
  }
  return 3;
}

// llama.cpp's default BPE pre-tokenizer: four regexes applied in turn; falcon's three.
void splitChain(std::span<const uint32_t> cpts, std::span<const CharClass> classes,
                std::vector<size_t>& lengths, bool falcon) {
  std::vector<size_t> scratch;
  refine(cpts, classes, lengths, scratch, [&](Segment& s) {  // [\p{P}\$\+<=>\^~\|]+ (falcon: `)
    splitByMatches(s, [&](size_t pos) { return punctuationRun(cpts, classes, s, pos, falcon); });
  });
  refine(cpts, classes, lengths, scratch, [&](Segment& s) { splitGpt2(s); });
  if (!falcon) {
    refine(cpts, classes, lengths, scratch, [&](Segment& s) {  // \p{N}+
      splitByMatches(s, [&](size_t pos) {
        size_t end = pos;
        while (end < s.end() && classes[end].number && !classes[end].whitespace) ++end;
        return end - pos;
      });
    });
  }
  refine(cpts, classes, lengths, scratch, [&](Segment& s) {  // [0-9][0-9][0-9]
    splitByMatches(s, [&](size_t pos) { return threeAsciiDigits(cpts, s, pos); });
  });
}

// starcoder, refact, command-r, ...: \p{N} (each digit alone), then the gpt2 regex.
void splitStarcoder(std::span<const uint32_t> cpts, std::span<const CharClass> classes,
                    std::vector<size_t>& lengths) {
  std::vector<size_t> scratch;
  refine(cpts, classes, lengths, scratch, [&](Segment& s) {
    splitByMatches(s, [&](size_t pos) -> size_t { return classes[pos].number ? 1 : 0; });
  });
  refine(cpts, classes, lengths, scratch, [&](Segment& s) { splitGpt2(s); });
}

}  // namespace

PreTokenizer preTokenizerFromName(std::string_view name) {
  static constexpr std::array<std::string_view, 4> kLlama3 = {"llama3", "llama-v3", "llama-bpe",
                                                              "falcon3"};
  static constexpr std::array<std::string_view, 2> kQwen2 = {"qwen2", "deepseek-r1-qwen"};
  static constexpr std::array<std::string_view, 13> kGpt2 = {
      "gpt-2",      "phi-2",      "jina-es",    "jina-de",      "gigachat",
      "jina-v1-en", "jina-v2-es", "jina-v2-de", "jina-v2-code", "roberta-bpe",
      "mpt",        "olmo",       "jais"};
  static constexpr std::array<std::string_view, 7> kStarcoder = {
      "starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"};
  const auto in = [&](const auto& names) {
    for (const auto& n : names) {
      if (n == name) return true;
    }
    return false;
  };
  if (name.empty() || name == "default") return PreTokenizer::kDefault;
  if (in(kLlama3)) return PreTokenizer::kLlama3;
  if (in(kQwen2)) return PreTokenizer::kQwen2;
  if (in(kGpt2)) return PreTokenizer::kGpt2;
  if (in(kStarcoder)) return PreTokenizer::kStarcoder;
  if (name == "falcon") return PreTokenizer::kFalcon;
  fail(ErrorCode::kUnsupported,
       "tokenizer.ggml.pre '{}' is not supported (supported: llama3, llama-bpe, qwen2, gpt-2, "
       "mpt, olmo, starcoder, refact, command-r, smollm, falcon, default)",
       std::string(name));
}

void splitWords(PreTokenizer pre, std::span<const uint32_t> cpts,
                std::span<const CharClass> classes, std::vector<size_t>& lengths) {
  lengths.clear();
  if (cpts.empty()) return;
  Segment whole(cpts, classes, 0, cpts.size(), lengths);
  switch (pre) {
    case PreTokenizer::kGpt2:
      splitGpt2(whole);
      return;
    case PreTokenizer::kLlama3:
      splitLlama3(whole, 3);
      return;
    case PreTokenizer::kQwen2:
      splitLlama3(whole, 1);
      return;
    case PreTokenizer::kDefault:
    case PreTokenizer::kFalcon:
      lengths.push_back(cpts.size());
      splitChain(cpts, classes, lengths, pre == PreTokenizer::kFalcon);
      return;
    case PreTokenizer::kStarcoder:
      lengths.push_back(cpts.size());
      splitStarcoder(cpts, classes, lengths);
      return;
  }
}

}  // namespace tpnode::model
