// Pre-tokenizer splits: a small table written by hand, and 1,144 cases whose expected words
// come from the original regexes run by Python's `regex` module
// (tests/model/data/pretokenizer_cases.json, written by tools/gen_pretokenizer_cases.py).
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "model/pretokenizer.h"
#include "tests/support/test_env.h"

namespace tpnode::model {
namespace {

std::vector<std::string> split(PreTokenizer pre, const std::string& text) {
  std::vector<uint32_t> cpts;
  decodeUtf8(text, cpts);
  std::vector<CharClass> classes;
  for (uint32_t c : cpts) classes.push_back(charClass(c));
  std::vector<size_t> lengths;
  splitWords(pre, cpts, classes, lengths);
  std::vector<std::string> words;
  size_t start = 0;
  for (size_t len : lengths) {
    EXPECT_GT(len, 0u);
    std::string w;
    for (size_t i = start; i < start + len; ++i) appendUtf8(cpts[i], w);
    words.push_back(w);
    start += len;
  }
  EXPECT_EQ(start, cpts.size());
  return words;
}

using W = std::vector<std::string>;

struct Case {
  PreTokenizer pre;
  std::string text;
  W words;
};

TEST(PreTokenizerTest, SplitsLikeTheRegexes) {
  const PreTokenizer kL3 = PreTokenizer::kLlama3, kQw = PreTokenizer::kQwen2,
                     kG2 = PreTokenizer::kGpt2, kDf = PreTokenizer::kDefault;
  const std::vector<Case> cases = {
      {kL3, "", {}},
      {kL3, "Hello world", {"Hello", " world"}},
      {kL3, "1234567", {"123", "456", "7"}},
      {kQw, "1234567", {"1", "2", "3", "4", "5", "6", "7"}},
      {kG2, "1234567 89", {"1234567", " 89"}},
      {kL3, "I'M you're", {"I", "'M", " you", "'re"}},
      {kG2, "I'M you're", {"I", "'", "M", " you", "'re"}},
      {kL3, "a   b", {"a", "  ", " b"}},
      {kL3, "a \n\n b", {"a", " \n\n", " b"}},
      {kG2, "a \n\n b", {"a", " \n\n", " b"}},
      {kL3, "x  ", {"x", "  "}},
      {kL3, "(x) ...\n\ny", {"(x", ")", " ...\n\n", "y"}},
      {kQw,
       "Zürich 2024: 3.14 ≠ π!",
       {"Zürich", " ", "2", "0", "2", "4", ":", " ", "3", ".", "1", "4", " ≠", " π", "!"}},
      {kL3, "数字😀 émoji", {"数字", "😀", " émoji"}},
      {kL3, "e\xCC\x81t\xC3\xA9", {"e", "\xCC\x81t\xC3\xA9"}},  // a combining mark is no letter
      {kL3, "\xC2\xA0x", {"\xC2\xA0x"}},  // nbsp is whitespace, and [^\r\n\p{L}\p{N}]
      {kDf, "a+b=1234 ok", {"a", "+", "b", "=", "123", "4", " ok"}},
      {kDf, "x...y", {"x", "...", "y"}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(split(c.pre, c.text), c.words) << c.text;
  }
}

TEST(PreTokenizerTest, AgreesWithTheOriginalRegexes) {
  const auto src = testing_support::testEnv("TPNODE_SOURCE_DIR");
  ASSERT_TRUE(src.has_value());
  std::ifstream in(*src + "/tests/model/data/pretokenizer_cases.json");
  ASSERT_TRUE(in.good());
  const auto doc = nlohmann::json::parse(in);
  size_t checked = 0;
  for (const auto& c : doc["cases"]) {
    const auto text = c["text"].get<std::string>();
    const auto pre = preTokenizerFromName(c["pre"].get<std::string>());
    EXPECT_EQ(split(pre, text), c["words"].get<W>()) << c["pre"] << ": " << c["text"].dump();
    ++checked;
  }
  EXPECT_GT(checked, 1000u);
}

TEST(PreTokenizerTest, NamesMapToTypes) {
  EXPECT_EQ(preTokenizerFromName("llama-bpe"), PreTokenizer::kLlama3);
  EXPECT_EQ(preTokenizerFromName("qwen2"), PreTokenizer::kQwen2);
  EXPECT_EQ(preTokenizerFromName("gpt-2"), PreTokenizer::kGpt2);
  EXPECT_EQ(preTokenizerFromName(""), PreTokenizer::kDefault);
  try {
    preTokenizerFromName("tekken");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("tekken"), std::string::npos);
  }
}

TEST(UnicodeTest, DecodesLikeLlamaCpp) {
  std::vector<uint32_t> c;
  decodeUtf8("a\xC3\xA9\xFF\xE2\x82", c);  // a, é, bad byte, truncated 3-byte sequence
  EXPECT_EQ(c, (std::vector<uint32_t>{'a', 0xE9, 0xFFFD, 0xFFFD, 0xFFFD}));
  EXPECT_TRUE(charClass(0x4E2D).letter);  // 中
  EXPECT_TRUE(charClass(0x0663).number);  // Arabic-Indic 3
  EXPECT_TRUE(charClass(0x3000).whitespace);
  EXPECT_FALSE(charClass(0x200B).whitespace);  // zero width space is not White_Space
  EXPECT_TRUE(charClass(0x00BF).punctuation);  // ¿
  EXPECT_FALSE(charClass('`').punctuation);    // Sk
  for (int b = 0; b < 256; ++b) {
    std::vector<uint32_t> one;
    decodeUtf8(byteToUtf8(static_cast<uint8_t>(b)), one);
    ASSERT_EQ(one.size(), 1u);
    EXPECT_EQ(utf8CodepointToByte(one[0]), b);
  }
  EXPECT_EQ(byteToUtf8(' '), "\xC4\xA0");  // "Ġ"
}

}  // namespace
}  // namespace tpnode::model
