// Tokenizer edge cases on small hand-built vocabularies (the llama.cpp reference cases are in
// tokenizer_reference_test.cc).
#include <gtest/gtest.h>

#include "common/error.h"
#include "model/tokenizer.h"
#include "model/unicode.h"

namespace tpnode::model {
namespace {

constexpr const char* kSp = "\xE2\x96\x81";  // "▁"

std::string sp(std::string s) {  // spaces -> "▁"
  std::string out;
  for (char c : s) out += c == ' ' ? std::string(kSp) : std::string(1, c);
  return out;
}

// <unk> <s> </s>, 256 byte tokens, then `pieces` with scores -1, -2, ... in order.
Vocab spmVocab(const std::vector<std::string>& pieces, bool with_bytes = true) {
  Vocab v;
  v.model = "llama";
  v.tokens = {"<unk>", "<s>", "</s>"};
  v.token_types = {2, 3, 3};
  v.scores = {0, 0, 0};
  if (with_bytes) {
    for (int b = 0; b < 256; ++b) {
      v.tokens.push_back(fmt::format("<0x{:02X}>", b));
      v.token_types.push_back(6);
      v.scores.push_back(0);
    }
  }
  for (size_t i = 0; i < pieces.size(); ++i) {
    v.tokens.push_back(pieces[i]);
    v.token_types.push_back(1);
    v.scores.push_back(-1.0f - static_cast<float>(i));
  }
  return v;
}

TokenId id(const Tokenizer& t, std::string_view text) {
  for (TokenId i = 0; i < t.nVocab(); ++i) {
    if (t.tokenText(i) == text) return i;
  }
  ADD_FAILURE() << "no token " << text;
  return -1;
}

std::vector<std::string> texts(const Tokenizer& t, const std::vector<TokenId>& ids) {
  std::vector<std::string> out;
  for (TokenId i : ids) out.emplace_back(t.tokenText(i));
  return out;
}

using Strings = std::vector<std::string>;

TEST(SpmTokenizerTest, MergesHighestScoreFirst) {
  Tokenizer a(spmVocab({sp(" a"), "ab", sp(" "), "a", "b"}));
  EXPECT_EQ(texts(a, a.encode("ab", false, false)), (Strings{sp(" a"), "b"}));
  Tokenizer b(spmVocab({"ab", sp(" a"), sp(" "), "a", "b"}));
  EXPECT_EQ(texts(b, b.encode("ab", false, false)), (Strings{sp(" "), "ab"}));
}

TEST(SpmTokenizerTest, BosAndEmptyText) {
  Tokenizer t(spmVocab({sp(" "), "a"}));
  EXPECT_EQ(t.encode("", true, false), (std::vector<TokenId>{1}));
  EXPECT_TRUE(t.encode("", false, false).empty());
  EXPECT_EQ(t.encode("a", true, false).front(), 1);
  EXPECT_EQ(t.decode(std::vector<TokenId>{}), "");
}

TEST(SpmTokenizerTest, ByteFallbackAndRoundTrip) {
  Tokenizer t(spmVocab({sp(" "), "a", "b"}));
  // "é" is not a piece: its two UTF-8 bytes become <0xC3> <0xA9>.
  EXPECT_EQ(texts(t, t.encode("é", false, false)), (Strings{sp(" "), "<0xC3>", "<0xA9>"}));
  EXPECT_EQ(t.tokenToPiece(id(t, "<0xC3>")), "\xC3");
  for (const std::string s :
       {"a", "ab ba", "  a  b   ", "\t\n", "Zürich ≠ π 😀", "broken \xC3", "x\xFF", " lead"}) {
    EXPECT_EQ(t.decode(t.encode(s, false, false)), s) << s;
    // As llama.cpp: after a removed BOS the prefix space is kept.
    EXPECT_EQ(t.decode(t.encode(s, true, false), /*remove_special=*/true), " " + s) << s;
  }
}

TEST(SpmTokenizerTest, BrokenUtf8SwallowsAnEscapedSpaceAsLlamaCppDoes) {
  // A bad lead byte starts a 4-byte symbol by its high bits ("\xFF\xFE" + 2 bytes of "▁"); its
  // bytes fall back to byte tokens, so that "▁" comes back as its bytes, not as a space.
  Tokenizer t(spmVocab({sp(" "), "b"}));
  EXPECT_EQ(t.decode(t.encode("\xFF\xFE b", false, false)),
            "\xFF\xFE\xE2\x96\x81"
            "b");
}

TEST(SpmTokenizerTest, WhitespaceRunsAreEscaped) {
  Tokenizer t(spmVocab({sp("  "), sp(" "), "a"}));
  EXPECT_EQ(texts(t, t.encode("a   a", false, false)),
            (Strings{sp(" "), "a", sp("  "), sp(" "), "a"}));
}

TEST(SpmTokenizerTest, UnknownByteWithoutByteTokensIsUnk) {
  Tokenizer t(spmVocab({sp(" "), "a"}, /*with_bytes=*/false));
  EXPECT_EQ(t.encode("a\x01", false, false), (std::vector<TokenId>{id(t, sp(" ")), id(t, "a"), 0}));
}

TEST(SpmTokenizerTest, ControlTokensOnlyParsedWhenAsked) {
  Tokenizer t(spmVocab({sp(" "), "a", "<", ">", "s", "/"}));
  const auto raw = t.encode("a</s>", false, false);
  EXPECT_EQ(std::count(raw.begin(), raw.end(), 2), 0);
  EXPECT_EQ(t.decode(raw), "a</s>");
  const auto parsed = t.encode("a</s>a", false, true);
  EXPECT_EQ(parsed,
            (std::vector<TokenId>{id(t, sp(" ")), id(t, "a"), 2, id(t, sp(" ")), id(t, "a")}));
  // Pieces: control tokens render only with special = true; decode drops them by default.
  EXPECT_EQ(t.tokenToPiece(2, true), "</s>");
  EXPECT_EQ(t.tokenToPiece(2, false), "");
  EXPECT_EQ(t.decode(parsed), "a a");
  EXPECT_EQ(t.decode(parsed, false, /*unparse_special=*/true), "a</s> a");
  EXPECT_TRUE(t.isEog(2));
  EXPECT_TRUE(t.isControl(1));
  EXPECT_FALSE(t.isControl(id(t, "a")));
}

TEST(SpmTokenizerTest, PieceLstripAndLeadingSpace) {
  Tokenizer t(spmVocab({sp(" a"), "a", sp(" ")}));
  EXPECT_EQ(t.tokenToPiece(id(t, sp(" a"))), " a");
  EXPECT_EQ(t.tokenToPiece(id(t, sp(" a")), true, 1), "a");
  const std::vector<TokenId> ids = {1, id(t, sp(" a")), id(t, sp(" a"))};
  // As llama.cpp: only the first token's piece loses its space, here the (empty) BOS piece.
  EXPECT_EQ(t.decode(ids), " a a");
  EXPECT_EQ(t.decode(ids, /*remove_special=*/true), " a a");
  EXPECT_EQ(t.decode(std::span(ids).subspan(1)), "a a");
}

TEST(TokenizerTest, RejectsBadIdsAndVocabs) {
  Tokenizer t(spmVocab({"a"}));
  const auto expectCode = [](ErrorCode code, auto&& fn) {
    try {
      fn();
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
    }
  };
  expectCode(ErrorCode::kInvalidArgument, [&] { t.tokenToPiece(t.nVocab()); });
  expectCode(ErrorCode::kInvalidArgument, [&] { t.decode(std::vector<TokenId>{-1}); });
  Vocab v = spmVocab({"a"});
  v.scores.pop_back();
  expectCode(ErrorCode::kInvalidData, [&] { Tokenizer x(v); });
  v = spmVocab({"a"});
  v.model = "bert";
  expectCode(ErrorCode::kUnsupported, [&] { Tokenizer x(v); });
  v.model = "gpt2";
  v.pre = "tekken";
  expectCode(ErrorCode::kUnsupported, [&] { Tokenizer x(v); });
  v.pre = "gpt-2";
  v.merges = {"nospace"};
  expectCode(ErrorCode::kInvalidData, [&] { Tokenizer x(v); });
  v = Vocab{};
  v.model = "llama";
  expectCode(ErrorCode::kInvalidData, [&] { Tokenizer x(v); });
  v = spmVocab({"a"});
  v.bos_id = 100000;  // ignored with a warning, as llama.cpp: the default id 1 stays
  EXPECT_EQ(Tokenizer(v).bos(), 1);
}

// A byte-level BPE vocabulary: ids 0-255 are the bytes in GPT-2's alphabet, then merged
// tokens, then special tokens.
Vocab bpeVocab(const std::string& pre,
               const std::vector<std::pair<std::string, std::string>>& merges) {
  Vocab v;
  v.model = "gpt2";
  v.pre = pre;
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(byteToUtf8(static_cast<uint8_t>(b)));
    v.token_types.push_back(1);
  }
  for (const auto& [l, r] : merges) {
    v.merges.push_back(l + " " + r);
    v.tokens.push_back(l + r);
    v.token_types.push_back(1);
  }
  v.tokens.push_back("<|endoftext|>");
  v.token_types.push_back(3);
  v.tokens.push_back("<tool>");
  v.token_types.push_back(4);
  v.bos_id = v.eos_id = static_cast<int64_t>(v.tokens.size() - 2);
  return v;
}

const std::string kG = byteToUtf8(' ');  // "Ġ"

TEST(BpeTokenizerTest, MergesLowestRankFirst) {
  Tokenizer a(bpeVocab("qwen2", {{"h", "e"}, {"e", "l"}}));
  EXPECT_EQ(texts(a, a.encode("hel", false, false)), (Strings{"he", "l"}));
  Tokenizer b(bpeVocab("qwen2", {{"e", "l"}, {"h", "e"}}));
  EXPECT_EQ(texts(b, b.encode("hel", false, false)), (Strings{"h", "el"}));
  Tokenizer c(bpeVocab("qwen2", {{kG, "h"}, {kG + "h", "i"}}));
  EXPECT_EQ(texts(c, c.encode("hi hi", false, false)), (Strings{"h", "i", kG + "hi"}));
}

TEST(BpeTokenizerTest, Llama3IgnoresMergesForWholeTokens) {
  // "abc" is a token but no merge path leads to it; llama3 emits it whole, gpt-2 does not.
  auto v = bpeVocab("llama3", {{"a", "b"}});
  v.tokens.push_back("abc");
  v.token_types.push_back(1);
  v.add_bos = false;
  Tokenizer l3(v);
  EXPECT_EQ(texts(l3, l3.encode("abc", false, false)), (Strings{"abc"}));
  v.pre = "gpt-2";
  Tokenizer g2(v);
  EXPECT_EQ(texts(g2, g2.encode("abc", false, false)), (Strings{"ab", "c"}));
}

TEST(BpeTokenizerTest, SpecialAndUserDefinedTokens) {
  Tokenizer t(bpeVocab("qwen2", {}));
  const TokenId eot = id(t, "<|endoftext|>");
  const TokenId tool = id(t, "<tool>");
  const auto raw = t.encode("x<|endoftext|><tool>", false, false);
  EXPECT_EQ(std::count(raw.begin(), raw.end(), eot), 0);
  EXPECT_EQ(raw.back(), tool);  // user-defined tokens always match
  EXPECT_EQ(t.encode("x<|endoftext|>", false, true).back(), eot);
  EXPECT_TRUE(t.isEog(eot));
  EXPECT_EQ(t.decode(std::vector<TokenId>{tool, eot}), "<tool>");
  EXPECT_EQ(t.decode(std::vector<TokenId>{tool, eot}, false, true), "<tool><|endoftext|>");
  EXPECT_FALSE(t.addBos());
  EXPECT_TRUE(t.encode("", true, false).empty());
}

TEST(BpeTokenizerTest, ExactRoundTripsOfValidUtf8) {
  for (const std::string pre : {"qwen2", "llama3", "gpt-2", "default"}) {
    auto v = bpeVocab(pre, {{"e", "l"}, {kG, "w"}});
    v.add_bos = false;
    Tokenizer t(v);
    for (const std::string s : {"", " ", "   ", "a\n\n b", "Zürich 2024: 3.14 ≠ π!", "数字😀\r\n",
                                "e\xCC\x81", "don't 'S", "tab\t\tx", "\xC2\xA0nbsp"}) {
      const auto ids = t.encode(s, true, false);
      std::string pieces;
      for (TokenId i : ids) pieces += t.tokenToPiece(i);
      EXPECT_EQ(pieces, s) << pre << ": " << s;
      if (pre == "qwen2") {
        EXPECT_EQ(t.decode(ids), s);
      }
    }
  }
}

TEST(BpeTokenizerTest, InvalidUtf8BecomesReplacementCharacter) {
  Tokenizer t(bpeVocab("qwen2", {}));
  EXPECT_EQ(t.decode(t.encode("a\xFF"
                              "b",
                              false, false)),
            "a\xEF\xBF\xBD"
            "b");
}

TEST(BpeTokenizerTest, CleanSpacesExceptQwen2) {
  auto v = bpeVocab("gpt-2", {});
  Tokenizer g(v);
  EXPECT_EQ(g.decode(g.encode("a . b , c 's d ' e", false, false)), "a. b, c's d'e");
  v.pre = "qwen2";
  Tokenizer q(v);
  EXPECT_EQ(q.decode(q.encode("a . b", false, false)), "a . b");
}

}  // namespace
}  // namespace tpnode::model
