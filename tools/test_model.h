// Writes random-weight Llama-family GGUF models (llama, qwen2, qwen3, gemma3; mixture of experts:
// qwen3moe, qwen2moe, mixtral) of any shape and
// tensor type, with one of the vocabularies of tools/test_vocab.h, deterministically from a seed
// (its own PRNG, so every platform writes the same bytes). Weight scales: matrices N(0, 0.02),
// attn_q/attn_k N(0, 0.125) so that attention is sharp and position-dependent (a RoPE, mask or
// KV-cache bug changes the logits clearly), output N(0, 0.156) so that logits have std ~2.5,
// norms 1 + N(0, 0.1), biases N(0, 0.1). 1-D tensors stay F32.
// gemma3 (model/gemma3_config.cc) adds QK norms, post_attention_norm / post_ffw_norm, the
// sliding-window keys below and an optional final logit softcap; its token_embd is
// N(0, 0.156) so that a tied head's logits have the scale of an untied one (std ~2.5 at dim 256)
// rather than 0.02 * sqrt(dim).
// Used by tools/make_test_model and the tests.
#pragma once

#include <cstdint>
#include <string>

#include "model/tensor_type.h"
#include "tools/test_vocab.h"

namespace tpnode::tools {

struct TestModelShape {
  std::string arch = "llama";
  int64_t dim = 256, layers = 2, heads = 8, kv_heads = 4, head_dim = 0, ffn = 768, vocab = 512;
  float rope_base = 10000.f, eps = 1e-5f;
  uint64_t seed = 1;
  bool tied = false;
  TestVocab vocab_kind = TestVocab::kLetters;
  model::TensorType type = model::TensorType::kF32;
  // Quantise the 2-D tensors to `type` but store their F32 dequantisation: a model with exactly
  // the quantised model's weight values on which every kernel computes in f32 (exact-math
  // references for kernels that keep activations in f32, such as the GPU ranks').
  bool f32_twin = false;
  // gemma3 only (ignored for the other architectures): local layers attend to the last
  // `swa_window` positions (0: no sliding window, keys not written); layer l is global when
  // l % swa_pattern == swa_pattern - 1; local layers use rope_base_swa. logit_softcap > 0 writes
  // final_logit_softcapping.
  int64_t swa_window = 4, swa_pattern = 2;
  float rope_base_swa = 10000.f, logit_softcap = 0.f;
  // Mixture of experts (arch qwen3moe, qwen2moe, or mixtral: written as arch llama with expert
  // tensors, as llama.cpp's converter writes Mixtral): `experts` experts of `expert_ffn` rows
  // (0: ffn), `experts_used` per token; qwen2moe adds a shared expert of `shared_ffn` rows
  // (0: ffn). The router ffn_gate_inp is N(0, 0.1) in F32 (llama-quantize leaves it F32), the
  // experts N(0, 0.02) in `type` as stacked 3-D tensors ffn_{gate,up,down}_exps.
  int64_t experts = 0, experts_used = 0, expert_ffn = 0, shared_ffn = 0;
};

// The small models the CPU and GPU parity tests generate: 2 layers (gemma3: 3, local, global,
// local), a 512-token vocabulary, and RoPE base 1e6 for qwen2/qwen3/gemma3 as their GGUFs have.
// `type` as parseTensorType takes it.
TestModelShape parityTestShape(const std::string& arch, const std::string& type, int64_t dim,
                               int64_t ffn, int64_t heads, int64_t kv_heads, bool tied,
                               uint64_t seed);

// "f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k"; Error(kInvalidArgument) otherwise.
model::TensorType parseTensorType(const std::string& name);

// Error(kInvalidArgument) for an inconsistent shape or a row that cuts a block; kIo on write.
void writeTestModel(const TestModelShape& shape, const std::string& path);

}  // namespace tpnode::tools
