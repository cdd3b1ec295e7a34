// ModelConfig: the hyperparameters of a Llama-family model, read from GGUF metadata
// (keys "<arch>.*", as llama.cpp's llama-arch.cpp names them). Plain data, immutable after
// construction; a missing required key or an unsupported value is an Error naming the key.
#pragma once

#include <cstdint>
#include <string>

#include "model/gguf.h"

namespace tpnode::model {

enum class RopeStyle { kNormal, kNeox };  // adjacent pairs (llama) / halves (qwen2, qwen3)

struct ModelConfig {
  std::string arch;  // llama, qwen2, qwen3
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;  // key/value length per head
  int64_t n_ff = 0;
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  int64_t n_rot = 0;  // rotated dimensions per head
  float rms_eps = 1e-5f;
  float rope_base = 10000.f;
  float rope_freq_scale = 1.f;  // 1 / linear scaling factor
  RopeStyle rope_style = RopeStyle::kNormal;
  bool qkv_bias = false;     // qwen2
  bool qk_norm = false;      // qwen3
  bool tied_output = false;  // no output.weight: the head reuses token_embd

  int64_t qDim() const { return n_head * head_dim; }
  int64_t kvDim() const { return n_head_kv * head_dim; }
  std::string summary() const;
};

// Throws Error(kInvalidData) for missing/malformed keys, Error(kUnsupported) for an
// architecture or rope scaling tpnode does not run.
ModelConfig readModelConfig(const GgufMetadata& meta);

}  // namespace tpnode::model
