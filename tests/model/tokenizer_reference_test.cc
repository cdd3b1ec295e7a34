// The tokenizer against llama.cpp's reference outputs (tests/data/reference/README.md): for the
// 7 generated models x 4 prompts, the prompt file's bytes tokenize to `prompt_ids`, every
// prompt and generated id renders to llama_token_to_piece's bytes, and the generated ids
// detokenize to llama_detokenize's bytes. The vocabularies are read with the GGUF reader.
// (llama.cpp's own tokenizer test files: llama_cpp_vocab_test.cc.)
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
#include "tests/model/reference_data.h"

namespace tpnode::model {
namespace {

namespace fs = std::filesystem;

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
  const fs::path dir = testing_support::referenceDataDir();
  const auto c = nlohmann::json::parse(readFile(dir / "cases" / (model + "__" + prompt + ".json")));
  ASSERT_EQ(testing_support::recordedModelMismatch(model, c["model_sha256"]), "");
  const auto file = GgufFile::open(testing_support::referenceModel(model));
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

}  // namespace
}  // namespace tpnode::model
