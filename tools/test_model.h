// Writes random-weight Llama-family GGUF models (llama, qwen2, qwen3) of any shape and tensor
// type, with a small SentencePiece-style vocabulary, deterministically from a seed (its own
// PRNG, so every platform writes the same bytes). Weight scales follow
// ../shared/reference/tools/make_model.py: matrices N(0, 0.02), attn_q/attn_k N(0, 0.125),
// output N(0, 0.156), norms 1 + N(0, 0.1), biases N(0, 0.1). 1-D tensors stay F32.
// Used by tools/make_test_model and the tests.
#pragma once

#include <cstdint>
#include <string>

#include "model/tensor_type.h"

namespace tpnode::tools {

struct TestModelShape {
  std::string arch = "llama";
  int64_t dim = 256, layers = 2, heads = 8, kv_heads = 4, head_dim = 0, ffn = 768, vocab = 512;
  float rope_base = 10000.f, eps = 1e-5f;
  uint64_t seed = 1;
  bool tied = false;
  model::TensorType type = model::TensorType::kF32;
  // Quantise the 2-D tensors to `type` but store their F32 dequantisation: a model with exactly
  // the quantised model's weight values on which every kernel computes in f32 (exact-math
  // references for kernels that keep activations in f32, such as the GPU ranks').
  bool f32_twin = false;
};

// "f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k"; Error(kInvalidArgument) otherwise.
model::TensorType parseTensorType(const std::string& name);

// Error(kInvalidArgument) for an inconsistent shape or a row that cuts a block; kIo on write.
void writeTestModel(const TestModelShape& shape, const std::string& path);

}  // namespace tpnode::tools
