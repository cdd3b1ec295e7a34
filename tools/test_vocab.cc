// Test-model vocabularies (see test_vocab.h): byte-pair merges learned on a fixed text.
#include "tools/test_vocab.h"

#include <cstdio>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "common/error.h"

namespace tpnode::tools {
namespace {

// The training text: plain English with some numbers, punctuation and a few accented words.
constexpr const char* kText =
    "The river runs past the old mill and under the stone bridge before it reaches the town. "
    "In the morning the fishermen push their boats into the water, and the children walk to "
    "school along the bank. Their teacher, who came from Zürich many years ago, tells them "
    "stories about mountains, lakes and trains that climb through long tunnels. Most of the "
    "houses were built in 1874, when the railway first arrived; the station still has its "
    "wooden benches and a clock that runs two minutes late. A small café near the square sells "
    "bread, cheese and coffee for 3.50 € a cup, and the owner knows every customer by name. "
    "On market days farmers bring apples, pears, potatoes and honey, and the streets are full "
    "of people talking, laughing and arguing about the price of everything.\n"
    "Learning to read is like learning to swim: at first the water seems heavy and strange, "
    "then one day the body remembers how to float. Good teachers know this. They do not hurry "
    "their students; they give them time, patience and interesting things to read. A student "
    "who enjoys a story will read the next page without being asked, and the next one after "
    "that. Reading builds vocabulary, and vocabulary builds understanding of the world.\n"
    "Computers process text by splitting it into small pieces called tokens. A token may be a "
    "whole word, part of a word, a number or a single character. The model then predicts which "
    "token is likely to come next, one step at a time, using what it has learned from a large "
    "amount of training data. Some words are common, so they become single tokens; rare words "
    "are broken into several pieces. This is why the same sentence can have a different "
    "number of tokens in different languages.\n"
    "Weather changes quickly in the hills. A bright, quiet afternoon can turn into a storm "
    "within an hour, with heavy rain, strong wind and thunder rolling between the valleys. "
    "Experienced walkers always carry a warm jacket, some water and a map, even on a sunny day. "
    "They check the forecast before they leave, tell someone where they are going and turn back "
    "when the clouds grow dark. Safety matters more than reaching the top.\n"
    "My grandmother kept a notebook of recipes: soup with lentils and carrots, bread with "
    "seeds, a cake made with butter, sugar, eggs and flour. She wrote the quantities in grams "
    "and the times in minutes, but she never measured anything herself. \"You taste it,\" she "
    "said, \"and you will know.\" Her kitchen smelled of onions, garlic and fresh herbs, and "
    "there was always a pot of tea on the table for visitors.\n"
    "In Köln and Straße names, in Mädchen and schön, letters like ä, ö, ü and ß appear; in "
    "French, café and résumé use é. Numbers such as 42, 100, 2024 and 3.14 appear in many "
    "texts, as do dates, prices and times: 09:30, 12.5%, $20 and 7 - 3 = 4. Questions end with "
    "a question mark? Lists use commas, and quotes use marks like these: 'single' or "
    "\"double\". Brackets (like this) and [these] or {those} group ideas together.\n"
    "The quick brown fox is a sentence every typist knows, because it uses every letter of the "
    "alphabet at least once. Programmers write functions, variables and loops: for each item in "
    "the list, if the value is greater than zero, add it to the total and return the result. "
    "Good code is easy to read, easy to test and easy to change.\n";

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// Splits UTF-8 text into code points (the text above is valid UTF-8).
std::vector<std::string> codePoints(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<uint8_t>(s[i]);
    const size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

// GPT-2's byte-to-unicode map: printable Latin-1 bytes stand for themselves, the others for
// code points 256 and up, in byte order.
std::vector<std::string> byteAlphabet() {
  std::vector<std::string> out(256);
  uint32_t extra = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    out[b] = utf8(printable ? b : extra++);
  }
  return out;
}

using Word = std::vector<std::string>;  // symbols

// Learns merges on the words (with counts) until `limit` new tokens exist or no pair is left.
// Ties between equally frequent pairs go to the smallest pair, so the result is fixed.
// Returns the merges in rank order; `tokens` gains each new merged string once.
std::vector<std::pair<std::string, std::string>> learnMerges(std::map<Word, int> words,
                                                             std::vector<std::string>& tokens,
                                                             size_t limit) {
  std::set<std::string> known(tokens.begin(), tokens.end());
  std::vector<std::pair<std::string, std::string>> merges;
  while (tokens.size() < limit) {
    std::map<std::pair<std::string, std::string>, int> pairs;
    for (const auto& [w, n] : words) {
      for (size_t i = 0; i + 1 < w.size(); ++i) pairs[{w[i], w[i + 1]}] += n;
    }
    if (pairs.empty()) break;
    auto best = pairs.begin();
    for (auto it = pairs.begin(); it != pairs.end(); ++it) {
      if (it->second > best->second) best = it;
    }
    const auto [a, b] = best->first;
    merges.emplace_back(a, b);
    if (known.insert(a + b).second) tokens.push_back(a + b);
    std::map<Word, int> next;
    for (const auto& [w, n] : words) {
      Word m;
      for (size_t i = 0; i < w.size(); ++i) {
        if (i + 1 < w.size() && w[i] == a && w[i + 1] == b) {
          m.push_back(a + b);
          ++i;
        } else {
          m.push_back(w[i]);
        }
      }
      next[m] += n;
    }
    words = std::move(next);
  }
  return merges;
}

void checkFull(size_t have, int64_t n, const char* kind) {
  if (static_cast<int64_t>(have) < n) {
    fail(ErrorCode::kInvalidArgument, "--vocab {}: the {} vocabulary holds at most {} tokens", n,
         kind, have);
  }
}

void addLetters(model::GgufWriter& w, int64_t n) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    tokens.push_back(buf);
    types.push_back(6);
  }
  const std::string letters = "etaoinshrdlucmfwypvbgkjqxz";
  tokens.push_back("\xe2\x96\x81");  // "▁"
  types.push_back(1);
  for (size_t i = 0; static_cast<int64_t>(tokens.size()) < n; ++i) {
    std::string piece;
    size_t k = i;
    do {
      piece += letters[k % letters.size()];
      k /= letters.size();
    } while (k > 0);
    tokens.push_back((i % 2 ? "" : "\xe2\x96\x81") + piece);
    types.push_back(1);
  }
  tokens.resize(static_cast<size_t>(n));
  types.resize(static_cast<size_t>(n));
  std::vector<float> scores(static_cast<size_t>(n));
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = -static_cast<float>(i);
  w.setString("tokenizer.ggml.model", "llama");
  w.setStringArray("tokenizer.ggml.tokens", tokens);
  w.setF32Array("tokenizer.ggml.scores", scores);
  w.setI32Array("tokenizer.ggml.token_type", types);
  w.setU32("tokenizer.ggml.unknown_token_id", 0);
  w.setU32("tokenizer.ggml.bos_token_id", 1);
  w.setU32("tokenizer.ggml.eos_token_id", 2);
  w.setBool("tokenizer.ggml.add_bos_token", true);
}

void addSpm(model::GgufWriter& w, int64_t n) {
  const std::string space = "\xe2\x96\x81";  // "▁"
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    tokens.push_back(buf);
  }
  tokens.push_back(space);
  for (char c = '!'; c <= '~'; ++c) tokens.emplace_back(1, c);
  for (const char* s : {"é", "ü", "ö", "ä", "ß", "—", "€"}) tokens.emplace_back(s);
  const size_t fixed = tokens.size();
  if (n < static_cast<int64_t>(fixed)) {
    fail(ErrorCode::kInvalidArgument, "--vocab {}: the spm vocabulary needs at least {}", n, fixed);
  }
  const std::set<std::string> base(tokens.begin() + 259, tokens.end());
  // Words: runs of known characters, each prefixed with "▁" as SentencePiece sees them.
  std::map<Word, int> words;
  Word cur;
  auto flush = [&] {
    if (cur.size() > 1) ++words[cur];
    cur = {space};
  };
  cur = {space};
  for (const std::string& cp : codePoints(kText)) {
    if (base.count(cp) && cp != space) {
      cur.push_back(cp);
    } else {
      flush();
    }
  }
  flush();
  learnMerges(words, tokens, static_cast<size_t>(n));
  checkFull(tokens.size(), n, "spm");
  std::vector<int32_t> types(tokens.size(), 1);
  types[0] = 2;
  types[1] = types[2] = 3;
  for (size_t i = 3; i < 259; ++i) types[i] = 6;
  std::vector<float> scores(tokens.size());
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = i < 259 ? 0.f : -static_cast<float>(i);
  w.setString("tokenizer.ggml.model", "llama");
  w.setStringArray("tokenizer.ggml.tokens", tokens);
  w.setF32Array("tokenizer.ggml.scores", scores);
  w.setI32Array("tokenizer.ggml.token_type", types);
  w.setU32("tokenizer.ggml.unknown_token_id", 0);
  w.setU32("tokenizer.ggml.bos_token_id", 1);
  w.setU32("tokenizer.ggml.eos_token_id", 2);
  w.setBool("tokenizer.ggml.add_bos_token", true);
  w.setBool("tokenizer.ggml.add_space_prefix", true);
}

// A rough pre-split for training (letters with an optional leading space, digits, other
// characters with an optional leading space, newlines): it only decides which merges are
// learned; encoding uses the real qwen2 pre-tokenizer.
std::map<Word, int> bpeWords(const std::vector<std::string>& alphabet) {
  std::map<Word, int> words;
  const std::string text = kText;
  auto cls = [](unsigned char c) {
    if (c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return 0;  // letter
    if (c >= '0' && c <= '9') return 1;
    if (c == ' ' || c == '\n') return 2;
    return 3;
  };
  for (size_t i = 0; i < text.size();) {
    size_t j = i;
    if (text[j] == ' ' && j + 1 < text.size() && cls(static_cast<uint8_t>(text[j + 1])) != 2) ++j;
    const int k = cls(static_cast<uint8_t>(text[j]));
    size_t e = j + 1;
    while (e < text.size() && k != 1 && cls(static_cast<uint8_t>(text[e])) == k) ++e;
    Word w;
    for (size_t b = i; b < e; ++b) w.push_back(alphabet[static_cast<uint8_t>(text[b])]);
    if (w.size() > 1) ++words[w];
    i = e;
  }
  return words;
}

void addBpe(model::GgufWriter& w, int64_t n) {
  const std::vector<std::string> specials = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  const auto min = static_cast<int64_t>(256 + specials.size());
  if (n < min)
    fail(ErrorCode::kInvalidArgument, "--vocab {}: the bpe vocabulary needs at least {}", n, min);
  const std::vector<std::string> alphabet = byteAlphabet();
  std::vector<std::string> tokens = alphabet;
  const auto merges =
      learnMerges(bpeWords(alphabet), tokens, static_cast<size_t>(n) - specials.size());
  checkFull(tokens.size() + specials.size(), n, "bpe");
  std::vector<std::string> merge_strings;
  for (const auto& [a, b] : merges) merge_strings.push_back(a + " " + b);
  std::vector<int32_t> types(tokens.size(), 1);
  const auto eot = static_cast<uint32_t>(tokens.size());
  for (const std::string& s : specials) {
    tokens.push_back(s);
    types.push_back(3);
  }
  w.setString("tokenizer.ggml.model", "gpt2");
  w.setString("tokenizer.ggml.pre", "qwen2");
  w.setStringArray("tokenizer.ggml.tokens", tokens);
  w.setI32Array("tokenizer.ggml.token_type", types);
  w.setStringArray("tokenizer.ggml.merges", merge_strings);
  w.setU32("tokenizer.ggml.bos_token_id", eot);
  w.setU32("tokenizer.ggml.eos_token_id", eot);
  w.setU32("tokenizer.ggml.padding_token_id", eot);
  w.setBool("tokenizer.ggml.add_bos_token", false);
}

}  // namespace

TestVocab parseTestVocab(const std::string& name) {
  if (name == "letters") return TestVocab::kLetters;
  if (name == "spm") return TestVocab::kSpm;
  if (name == "bpe") return TestVocab::kBpe;
  fail(ErrorCode::kInvalidArgument, "--vocab-kind {}: use letters, spm or bpe", name);
}

void addTestVocab(model::GgufWriter& w, TestVocab kind, int64_t n) {
  switch (kind) {
    case TestVocab::kLetters:
      if (n < 260) fail(ErrorCode::kInvalidArgument, "--vocab {}: at least 260", n);
      addLetters(w, n);
      return;
    case TestVocab::kSpm:
      addSpm(w, n);
      return;
    case TestVocab::kBpe:
      addBpe(w, n);
      return;
  }
}

}  // namespace tpnode::tools
