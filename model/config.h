// ModelConfig: the hyperparameters of a Llama-family model, read from GGUF metadata
// (keys "<arch>.*", as llama.cpp's llama-arch.cpp names them). Plain data, immutable after
// construction; a missing required key or an unsupported value is an Error naming the key.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/gguf.h"

namespace tpnode::model {

enum class RopeStyle { kNormal, kNeox };  // adjacent pairs (llama) / halves (qwen2, qwen3)
enum class FfnAct { kSilu, kGeluTanh };   // SwiGLU (llama family) / GeGLU (gemma3)

struct ModelConfig {
  std::string arch;  // llama, qwen2, qwen3, gemma3, qwen3moe, qwen2moe
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
  // Gemma 3 (gemma3_config.cc); the defaults are the llama family's behaviour.
  FfnAct ffn_act = FfnAct::kSilu;
  float embd_scale = 0.f;         // token embeddings are multiplied by this (0: not scaled)
  float attn_scale = 0.f;         // query scale before softmax (0: 1 / sqrt(head_dim))
  bool post_norms = false;        // post_attention_norm and post_ffw_norm before the residuals
  int64_t n_swa = 0;              // sliding window (positions) of the local layers, 0: none
  std::vector<bool> swa_layers;   // [n_layer] true: local (sliding-window) layer
  float rope_base_swa = 10000.f;  // RoPE base / scale of the local layers
  float rope_freq_scale_swa = 1.f;
  float logit_softcap = 0.f;  // logits = c * tanh(logits / c) when > 0
  // Mixture of experts (model/moe_config.cc; n_expert == 0: the dense FFN): qwen3moe, qwen2moe
  // and Mixtral (llama with expert tensors). Each token's FFN is the weighted sum of the
  // n_expert_used experts its router (ffn_gate_inp) ranks highest (model/moe_router.h).
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;           // rows of one expert's gate / up
  int64_t n_ff_shexp = 0;         // qwen2moe's shared expert (0: none)
  bool moe_norm_weights = false;  // the selected experts' weights renormalised to sum 1

  bool isMoe() const { return n_expert > 0; }

  bool isSwa(int64_t layer) const { return n_swa > 0 && swa_layers[static_cast<size_t>(layer)]; }
  float ropeBase(int64_t layer) const { return isSwa(layer) ? rope_base_swa : rope_base; }
  float ropeFreqScale(int64_t layer) const {
    return isSwa(layer) ? rope_freq_scale_swa : rope_freq_scale;
  }

  int64_t qDim() const { return n_head * head_dim; }
  int64_t kvDim() const { return n_head_kv * head_dim; }
  std::string summary() const;
};

// Throws Error(kInvalidData) for missing/malformed keys, Error(kUnsupported) for an
// architecture or rope scaling tpnode does not run.
ModelConfig readModelConfig(const GgufMetadata& meta);

// The gemma3-specific keys (gemma3_config.cc), on top of the common ones already in `c`.
void readGemma3Config(const GgufMetadata& meta, ModelConfig& c);

// The mixture-of-experts keys (moe_config.cc) on top of the common ones already in `c`:
// Error(kInvalidData) naming the key and value for counts that cannot be right.
void readMoeConfig(const GgufMetadata& meta, ModelConfig& c);

// Returns v when it is finite and in (0, 1e30]; Error(kInvalidData) naming `key` and the value
// otherwise (for epsilons and RoPE bases, which would otherwise give NaN or garbage silently).
double finitePositive(const std::string& key, double v);

}  // namespace tpnode::model
