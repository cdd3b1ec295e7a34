// Gemma 3's hyperparameters, as llama.cpp reads them (src/models/gemma3.cpp
// load_arch_hparams, llama-hparams.cpp set_swa_pattern, llama-model.cpp rope type):
// - token embeddings scaled by sqrt(n_embd); NeoX RoPE; GeGLU (tanh GELU) FFN;
//   post_attention_norm / post_ffw_norm before each residual add;
// - sliding-window attention when gemma3.attention.sliding_window > 0: a layer is local unless
//   (il % pattern) == pattern - 1, pattern = gemma3.attention.sliding_window_pattern (an int,
//   default 6) or that key as a per-layer bool array; local layers use
//   gemma3.rope.freq_base_swa (default 10000) and no rope scaling;
// - query scale 1 / sqrt(head_dim), except the 62-layer (27B) model: 1 / sqrt(n_embd / n_head);
// - final_logit_softcapping when present (0: none).
// Norm weights are used as stored: llama.cpp's converter already added Gemma's "+1".
#include <cmath>

#include "common/error.h"
#include "model/config.h"

namespace tpnode::model {

void readGemma3Config(const GgufMetadata& m, ModelConfig& c) {
  const std::string a = c.arch + ".";
  c.rope_style = RopeStyle::kNeox;
  c.ffn_act = FfnAct::kGeluTanh;
  c.post_norms = true;
  c.embd_scale = std::sqrt(static_cast<float>(c.n_embd));
  c.attn_scale = c.n_layer == 62 ? 1.0f / std::sqrt(static_cast<float>(c.n_embd / c.n_head))
                                 : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  c.logit_softcap = static_cast<float>(m.getFloatOr(a + "final_logit_softcapping", 0.0));
  if (!std::isfinite(c.logit_softcap) || c.logit_softcap < 0) {
    fail(ErrorCode::kInvalidData,
         "GGUF key '{}final_logit_softcapping' = {} is not finite and >= 0", a, c.logit_softcap);
  }
  c.n_swa = m.getIntOr(a + "attention.sliding_window", 0);
  if (c.n_swa < 0) {
    fail(ErrorCode::kInvalidData, "GGUF key '{}attention.sliding_window' = {} is negative", a,
         c.n_swa);
  }
  c.swa_layers.assign(static_cast<size_t>(c.n_layer), false);
  if (c.n_swa == 0) return;
  const std::string pk = a + "attention.sliding_window_pattern";
  const GgufValue* pv = m.find(pk);
  if (pv && pv->type == GgufValueType::kArray) {
    std::vector<int64_t> flags = m.getIntArray(pk);
    if (static_cast<int64_t>(flags.size()) < c.n_layer) {
      fail(ErrorCode::kInvalidData, "GGUF key '{}' has {} entries for {} layers", pk, flags.size(),
           c.n_layer);
    }
    for (int64_t l = 0; l < c.n_layer; ++l) c.swa_layers[static_cast<size_t>(l)] = flags[l] != 0;
  } else {
    const int64_t pattern = m.getIntOr(pk, 6);
    if (pattern < 0) fail(ErrorCode::kInvalidData, "GGUF key '{}' = {} is negative", pk, pattern);
    for (int64_t l = 0; l < c.n_layer; ++l) {
      c.swa_layers[static_cast<size_t>(l)] = pattern == 0 || l % pattern < pattern - 1;
    }
  }
  c.rope_base_swa = static_cast<float>(
      finitePositive(a + "rope.freq_base_swa", m.getFloatOr(a + "rope.freq_base_swa", 10000.0)));
}

}  // namespace tpnode::model
