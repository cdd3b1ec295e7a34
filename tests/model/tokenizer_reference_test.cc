// The tokenizer against llama.cpp's reference outputs (../shared/reference, see its README):
// for 7 GGUF models x 4 prompts, the prompt file's bytes tokenize to `prompt_ids`, every
// prompt and generated id renders to llama_token_to_piece's bytes, and the generated ids
// detokenize to llama_detokenize's bytes. The vocabularies are read with the GGUF reader.
// Also (opt-in) llama.cpp's own tokenizer test files for ten real vocabularies.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/gguf.h"
#include "model/tokenizer.h"
#include "model/vocab_gguf.h"
#include "tests/model/shared_dir.h"

namespace tpnode::model {
namespace {

namespace fs = std::filesystem;

// A missing reference set fails the test (CI has it as ../shared): a skip would hide it.
fs::path referenceDir() {
  return fs::path(testing_support::sharedDir()) / "reference";
}

std::string readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string hex(std::string_view bytes) {
  std::string out;
  for (const char c : bytes) out += fmt::format("{:02x}", static_cast<uint8_t>(c));
  return out;
}

using Param = std::tuple<std::string, std::string>;  // model stem, prompt stem

class TokenizerReferenceTest : public testing::TestWithParam<Param> {};

TEST_P(TokenizerReferenceTest, MatchesLlamaCpp) {
  const auto& [model, prompt] = GetParam();
  const fs::path dir = referenceDir();
  ASSERT_TRUE(fs::exists(dir / "cases")) << dir << " is missing (set TPNODE_SHARED_DIR)";
  const auto c = nlohmann::json::parse(readFile(dir / "cases" / (model + "__" + prompt + ".json")));
  const auto file = GgufFile::open((dir / "models" / (model + ".gguf")).string());
  const Tokenizer tok(loadVocab(*file));
  ASSERT_EQ(tok.nVocab(), c["n_vocab"].get<int>());

  const std::string text = readFile(dir / "prompts" / (prompt + ".txt"));
  ASSERT_EQ(text, c["prompt"].get<std::string>());
  const auto prompt_ids = c["prompt_ids"].get<std::vector<TokenId>>();
  const auto generated_ids = c["generated_ids"].get<std::vector<TokenId>>();
  EXPECT_EQ(tok.addBos(), c["add_bos"].get<bool>());
  EXPECT_EQ(tok.encode(text, /*add_special=*/true, /*parse_special=*/false), prompt_ids);

  for (size_t i = 0; i < prompt_ids.size(); ++i) {
    EXPECT_EQ(hex(tok.tokenToPiece(prompt_ids[i])), c["prompt_pieces_hex"][i]) << "prompt " << i;
  }
  for (size_t i = 0; i < generated_ids.size(); ++i) {
    EXPECT_EQ(hex(tok.tokenToPiece(generated_ids[i])), c["generated_pieces_hex"][i])
        << "generated " << i;
  }
  EXPECT_EQ(hex(tok.decode(generated_ids)), c["generated_text_hex"]);
  // Round trip: the text comes back from its tokens (no BOS, so no kept prefix space).
  EXPECT_EQ(tok.decode(tok.encode(text, false, false)), text);
}

INSTANTIATE_TEST_SUITE_P(
    Reference, TokenizerReferenceTest,
    testing::Combine(testing::Values("llama-tiny-f32", "llama-tiny-q8_0", "llama-tiny-q4_0",
                                     "llama-tiny-q4_k", "llama-tiny-q6_k", "llama-tiny-kv1-f32",
                                     "qwen2-tiny-f32"),
                     testing::Values("en_sentence", "paragraph", "unicode", "word")),
    [](const testing::TestParamInfo<Param>& p) {
      std::string name = std::get<0>(p.param) + "__" + std::get<1>(p.param);
      for (char& ch : name) {
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return name;
    });

// llama.cpp's own tokenizer tests: models/ggml-vocab-<name>.gguf with .inp (46 strings
// separated by "\n__ggml_vocab_test__\n") and .out (one line of ids each, add_special =
// false, parse_special = false) in a llama.cpp source tree. Opt-in, the files are ~60 MB:
// TPNODE_LLAMA_CPP_DIR=<llama.cpp tree> runs it, otherwise it is skipped.
class LlamaCppVocabTest : public testing::TestWithParam<std::string> {};

TEST_P(LlamaCppVocabTest, MatchesLlamaCppTokenizerTests) {
  const char* root = std::getenv("TPNODE_LLAMA_CPP_DIR");
  if (root == nullptr) GTEST_SKIP() << "set TPNODE_LLAMA_CPP_DIR to a llama.cpp source tree";
  const fs::path gguf = fs::path(root) / "models" / ("ggml-vocab-" + GetParam() + ".gguf");
  ASSERT_TRUE(fs::exists(gguf)) << gguf;
  const Tokenizer tok(loadVocab(*GgufFile::open(gguf.string())));
  const std::string inp = readFile(gguf.string() + ".inp");
  std::istringstream out(readFile(gguf.string() + ".out"));
  const std::string sep = "\n__ggml_vocab_test__\n";
  size_t n = 0;
  for (size_t pos = 0, end; (end = inp.find(sep, pos)) != std::string::npos;
       pos = end + sep.size()) {
    const std::string text = inp.substr(pos, end - pos);
    std::string line;
    ASSERT_TRUE(std::getline(out, line)) << "no ids for test " << n;
    std::string got;
    for (const TokenId id : tok.encode(text, false, false)) got += fmt::format(" {}", id);
    EXPECT_EQ(got, line) << GetParam() << " test " << n << ": '" << text << "'";
    if (!tok.isSpm()) {  // byte-level BPE: the pieces are the text again
      std::string pieces;
      for (const TokenId id : tok.encode(text, false, false)) pieces += tok.tokenToPiece(id);
      EXPECT_EQ(pieces, text);
    }
    ++n;
  }
  EXPECT_GT(n, 10u);
}

INSTANTIATE_TEST_SUITE_P(Vocabs, LlamaCppVocabTest,
                         testing::Values("llama-spm", "phi-3", "llama-bpe", "qwen2", "gpt-2", "mpt",
                                         "starcoder", "refact", "command-r", "falcon"),
                         [](const testing::TestParamInfo<std::string>& p) {
                           std::string name = p.param;
                           for (char& ch : name) {
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace tpnode::model
