// make_test_model: writes a random-weight Llama-family GGUF (tools/test_model.h).
// qwen3moe: make_test_model --arch qwen3moe --out m.gguf --experts 8 --experts-used 2
//           --expert-ffn 256 (qwen2moe adds --shared-ffn; mixtral is llama with expert tensors)
// gemma3: make_test_model --arch gemma3 --out g.gguf --dim 256 --heads 4 --kv-heads 1 --ffn 512
//         --layers 3 --tied --rope-base 1e6 --swa-window 4 --swa-pattern 2
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
  std::string out, type = "f32", vocab_kind = "letters";
  CLI::App app{"make_test_model: random-weight Llama-family GGUF for tests and benchmarks"};
  app.add_option("--out", out, "Output GGUF path")->required();
  app.add_option("--arch", sh.arch,
                 "llama, qwen2, qwen3, gemma3; mixture of experts: qwen3moe, qwen2moe, mixtral")
      ->capture_default_str();
  app.add_option("--dim", sh.dim)->capture_default_str();
  app.add_option("--layers", sh.layers)->capture_default_str();
  app.add_option("--heads", sh.heads)->capture_default_str();
  app.add_option("--kv-heads", sh.kv_heads)->capture_default_str();
  app.add_option("--head-dim", sh.head_dim, "0: dim / heads")->capture_default_str();
  app.add_option("--ffn", sh.ffn)->capture_default_str();
  app.add_option("--vocab", sh.vocab, ">= 260")->capture_default_str();
  app.add_option("--vocab-kind", vocab_kind,
                 "letters (a fixed list), spm or bpe (merges learned on a built-in text)")
      ->capture_default_str();
  app.add_option("--eps", sh.eps, "RMSNorm epsilon")->capture_default_str();
  app.add_option("--type", type, "f32 f16 bf16 q8_0 q4_0 q4_k q6_k (2-D tensors)")
      ->capture_default_str();
  app.add_option("--rope-base", sh.rope_base)->capture_default_str();
  app.add_option("--seed", sh.seed)->capture_default_str();
  app.add_option("--swa-window", sh.swa_window, "gemma3: sliding window of local layers (0: none)")
      ->capture_default_str();
  app.add_option("--swa-pattern", sh.swa_pattern,
                 "gemma3: layer l is global when l % pattern == pattern - 1")
      ->capture_default_str();
  app.add_option("--rope-base-swa", sh.rope_base_swa, "gemma3: RoPE base of local layers")
      ->capture_default_str();
  app.add_option("--logit-softcap", sh.logit_softcap, "gemma3: final logit softcap (0: none)")
      ->capture_default_str();
  app.add_option("--experts", sh.experts, "MoE: experts per layer")->capture_default_str();
  app.add_option("--experts-used", sh.experts_used, "MoE: experts per token")
      ->capture_default_str();
  app.add_option("--expert-ffn", sh.expert_ffn, "MoE: rows of one expert (0: --ffn)")
      ->capture_default_str();
  app.add_option("--shared-ffn", sh.shared_ffn, "qwen2moe: rows of the shared expert (0: --ffn)")
      ->capture_default_str();
  app.add_flag("--tied", sh.tied, "No output.weight (head tied to token_embd)");
  app.add_flag("--f32-twin", sh.f32_twin,
               "Quantise to --type but store the dequantised values as F32 (exact-math twin)");
  CLI11_PARSE(app, argc, argv);
  try {
    sh.type = tpnode::tools::parseTensorType(type);
    sh.vocab_kind = tpnode::tools::parseTestVocab(vocab_kind);
    tpnode::tools::writeTestModel(sh, out);
  } catch (const tpnode::Error& e) {
    std::fprintf(stderr, "make_test_model: %s\n", e.what());
    return 1;
  }
  return 0;
}
