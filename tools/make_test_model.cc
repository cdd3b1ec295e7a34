// make_test_model: writes a random-weight Llama-family GGUF (tools/test_model.h).
//
//   make_test_model --out m.gguf --dim 1024 --layers 2 --heads 8 --kv-heads 2 --ffn 1024
//                   --vocab 512 --type q4_k --seed 7
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "common/error.h"
#include "tools/test_model.h"

int main(int argc, char** argv) {
  tpnode::tools::TestModelShape sh;
  std::string out, type = "f32";
  CLI::App app{"make_test_model: random-weight Llama-family GGUF for tests and benchmarks"};
  app.add_option("--out", out, "Output GGUF path")->required();
  app.add_option("--arch", sh.arch, "llama, qwen2 or qwen3")->capture_default_str();
  app.add_option("--dim", sh.dim)->capture_default_str();
  app.add_option("--layers", sh.layers)->capture_default_str();
  app.add_option("--heads", sh.heads)->capture_default_str();
  app.add_option("--kv-heads", sh.kv_heads)->capture_default_str();
  app.add_option("--head-dim", sh.head_dim, "0: dim / heads")->capture_default_str();
  app.add_option("--ffn", sh.ffn)->capture_default_str();
  app.add_option("--vocab", sh.vocab, ">= 260")->capture_default_str();
  app.add_option("--type", type, "f32 f16 bf16 q8_0 q4_0 q4_k q6_k (2-D tensors)")
      ->capture_default_str();
  app.add_option("--rope-base", sh.rope_base)->capture_default_str();
  app.add_option("--seed", sh.seed)->capture_default_str();
  app.add_flag("--tied", sh.tied, "No output.weight (head tied to token_embd)");
  app.add_flag("--f32-twin", sh.f32_twin,
               "Quantise to --type but store the dequantised values as F32 (exact-math twin)");
  CLI11_PARSE(app, argc, argv);
  try {
    sh.type = tpnode::tools::parseTensorType(type);
    tpnode::tools::writeTestModel(sh, out);
  } catch (const tpnode::Error& e) {
    std::fprintf(stderr, "make_test_model: %s\n", e.what());
    return 1;
  }
  return 0;
}
