// llama.cpp's own tokenizer test files for ten real vocabularies, read from a llama.cpp source
// tree: built only when CMake is given one, e.g.
//   cmake -B build -DTPNODE_LLAMA_CPP_DIR="$(tools/llama-cpp.sh --src)"
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "model/gguf.h"
#include "model/tokenizer.h"
#include "model/vocab_gguf.h"

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

// models/ggml-vocab-<name>.gguf with .inp (strings separated by "\n__ggml_vocab_test__\n") and
// .out (one line of ids each, add_special = false, parse_special = false).
class LlamaCppVocabTest : public testing::TestWithParam<std::string> {};

TEST_P(LlamaCppVocabTest, MatchesLlamaCppTokenizerTests) {
  const fs::path gguf =
      fs::path(TPNODE_LLAMA_CPP_DIR) / "models" / ("ggml-vocab-" + GetParam() + ".gguf");
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
