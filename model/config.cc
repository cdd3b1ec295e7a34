#include "model/config.h"

#include <cmath>

#include <fmt/format.h>

#include "common/error.h"

namespace tpnode::model {

std::string ModelConfig::summary() const {
  return fmt::format(
             "{}: dim {}, layers {}, heads {} (kv {}), head dim {}, ffn {}, vocab {}, rope {} base "
             "{} "
             "scale {}, rms eps {}{}{}{}",
             arch, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab,
             rope_style == RopeStyle::kNeox ? "neox" : "normal", rope_base, rope_freq_scale,
             rms_eps, qkv_bias ? ", qkv bias" : "", qk_norm ? ", qk norm" : "",
             tied_output ? ", tied head" : "") +
         (n_swa > 0 ? fmt::format(", sliding window {} (rope base {})", n_swa, rope_base_swa)
                    : "") +
         (ffn_act == FfnAct::kGeluTanh ? ", geglu" : "") + (post_norms ? ", post norms" : "") +
         (logit_softcap > 0 ? fmt::format(", logit softcap {}", logit_softcap) : "") +
         (n_expert > 0
              ? fmt::format(", {} experts ({} per token{}) of ffn {}", n_expert, n_expert_used,
                            moe_norm_weights ? ", weights renormalised" : "", n_ff_exp)
              : "") +
         (n_ff_shexp > 0 ? fmt::format(", shared expert ffn {}", n_ff_shexp) : "");
}

double finitePositive(const std::string& key, double v) {
  // A single float in (0, 1e30]: rms epsilons and RoPE bases outside that range produce NaN or
  // constant activations rather than an error, so they are refused at load.
  if (!std::isfinite(v) || v <= 0 || v > 1e30) {
    fail(ErrorCode::kInvalidData,
         "GGUF key '{}' = {} cannot be right (expected a finite value > 0); the file is corrupt "
         "or was written by a broken converter",
         key, v);
  }
  return v;
}

ModelConfig readModelConfig(const GgufMetadata& m) {
  ModelConfig c;
  c.arch = m.getString("general.architecture");
  if (c.arch != "llama" && c.arch != "qwen2" && c.arch != "qwen3" && c.arch != "gemma3" &&
      c.arch != "qwen3moe" && c.arch != "qwen2moe") {
    fail(ErrorCode::kUnsupported,
         "general.architecture '{}' is not supported (llama, qwen2, qwen3, gemma3, qwen3moe, "
         "qwen2moe are)",
         c.arch);
  }
  const std::string a = c.arch + ".";
  auto positive = [&](const std::string& key, int64_t v) {
    if (v <= 0 || v > (int64_t{1} << 31)) {
      fail(ErrorCode::kInvalidData, "GGUF key '{}' = {} is out of range", key, v);
    }
    return v;
  };
  c.n_embd = positive(a + "embedding_length", m.getInt(a + "embedding_length"));
  c.n_layer = positive(a + "block_count", m.getInt(a + "block_count"));
  c.n_head = positive(a + "attention.head_count", m.getInt(a + "attention.head_count"));
  c.n_head_kv =
      positive(a + "attention.head_count_kv", m.getIntOr(a + "attention.head_count_kv", c.n_head));
  c.n_ff = positive(a + "feed_forward_length", m.getInt(a + "feed_forward_length"));
  c.n_ctx_train = positive(a + "context_length", m.getIntOr(a + "context_length", 2048));
  c.head_dim = positive(a + "attention.key_length",
                        m.getIntOr(a + "attention.key_length", c.n_embd / c.n_head));
  if (m.getIntOr(a + "attention.value_length", c.head_dim) != c.head_dim) {
    fail(ErrorCode::kUnsupported, "GGUF key '{}attention.value_length' differs from key_length", a);
  }
  c.n_rot =
      positive(a + "rope.dimension_count", m.getIntOr(a + "rope.dimension_count", c.head_dim));
  if (c.n_rot > c.head_dim || c.n_rot % 2 != 0) {
    fail(ErrorCode::kInvalidData, "GGUF key '{}rope.dimension_count' = {} does not fit head dim {}",
         a, c.n_rot, c.head_dim);
  }
  if (c.n_head % c.n_head_kv != 0) {
    fail(ErrorCode::kInvalidData,
         "GGUF keys '{}attention.head_count' = {} and '{}attention.head_count_kv' = {}: the heads "
         "are not a multiple of the kv heads",
         a, c.n_head, a, c.n_head_kv);
  }
  c.rms_eps = static_cast<float>(finitePositive(
      a + "attention.layer_norm_rms_epsilon", m.getFloat(a + "attention.layer_norm_rms_epsilon")));
  c.rope_base = static_cast<float>(
      finitePositive(a + "rope.freq_base", m.getFloatOr(a + "rope.freq_base", 10000.0)));
  std::string scaling = m.getStringOr(a + "rope.scaling.type", "none");
  double factor = m.getFloatOr(a + "rope.scaling.factor", 0.0);
  if (!std::isfinite(factor) || factor < 0) {
    fail(ErrorCode::kInvalidData,
         "GGUF key '{}rope.scaling.factor' = {} is not a finite value >= 0", a, factor);
  }
  if (scaling == "linear" && factor > 0) {
    c.rope_freq_scale = static_cast<float>(1.0 / factor);
  } else if (scaling != "none" && scaling != "linear" && factor != 0.0 && factor != 1.0) {
    fail(ErrorCode::kUnsupported, "GGUF key '{}rope.scaling.type' = '{}' is not supported", a,
         scaling);
  }
  c.rope_style = c.arch == "llama" ? RopeStyle::kNormal : RopeStyle::kNeox;
  c.qkv_bias = m.findTensor("blk.0.attn_q.bias") != nullptr;
  c.qk_norm = m.findTensor("blk.0.attn_q_norm.weight") != nullptr;
  const GgufTensorInfo& embd = m.tensor("token_embd.weight");
  c.n_vocab = static_cast<int64_t>(embd.ne[1]);
  c.tied_output = m.findTensor("output.weight") == nullptr;
  if (c.arch == "gemma3") readGemma3Config(m, c);
  readMoeConfig(m, c);
  return c;
}

}  // namespace tpnode::model
