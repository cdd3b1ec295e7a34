// The mixture-of-experts hyperparameters, as llama.cpp reads them (llama-model.cpp load_hparams,
// src/models/{qwen3moe,qwen2moe,llama}.cpp):
// - "<arch>.expert_count" experts per layer (at most 1024, LLAMA_MAX_EXPERTS), of which
//   "<arch>.expert_used_count" run per token (1 <= used <= count);
// - one expert's FFN width: qwen3moe / qwen2moe "<arch>.expert_feed_forward_length" (default
//   feed_forward_length / expert_used_count); Mixtral (llama) uses feed_forward_length itself;
// - qwen2moe's shared expert: "<arch>.expert_shared_feed_forward_length" (default
//   feed_forward_length), gated per token by sigmoid(ffn_gate_inp_shexp . x);
// - the router's softmax over all experts, then the top k; qwen3moe and Mixtral renormalise the
//   k selected weights to sum 1 (build_moe_ffn's norm_w = true), qwen2moe keeps them as they are.
// A llama file without expert_count is dense; qwen3moe / qwen2moe without it are refused.
#include <fmt/format.h>

#include "common/error.h"
#include "model/config.h"

namespace tpnode::model {
namespace {

constexpr int64_t kMaxExperts = 1024;  // llama.cpp's LLAMA_MAX_EXPERTS

int64_t positiveKey(const GgufMetadata& m, const std::string& key, int64_t fallback,
                    int64_t limit) {
  const int64_t v = m.getIntOr(key, fallback);
  if (v <= 0 || v > limit) {
    fail(ErrorCode::kInvalidData, "GGUF key '{}' = {} cannot be right (expected 1..{})", key, v,
         limit);
  }
  return v;
}

}  // namespace

void readMoeConfig(const GgufMetadata& m, ModelConfig& c) {
  const std::string a = c.arch + ".";
  const bool moe_arch = c.arch == "qwen3moe" || c.arch == "qwen2moe";
  if (!moe_arch && (c.arch != "llama" || m.getIntOr(a + "expert_count", 0) == 0)) return;
  c.n_expert = positiveKey(m, a + "expert_count", 0, kMaxExperts);
  c.n_expert_used = m.getIntOr(a + "expert_used_count", 0);
  if (c.n_expert_used <= 0 || c.n_expert_used > c.n_expert) {
    fail(ErrorCode::kInvalidData,
         "GGUF key '{}expert_used_count' = {} cannot be right: the model has {} experts "
         "('{}expert_count'), so 1..{} can run per token",
         a, c.n_expert_used, c.n_expert, a, c.n_expert);
  }
  c.n_ff_exp = c.arch == "llama" ? c.n_ff
                                 : positiveKey(m, a + "expert_feed_forward_length",
                                               c.n_ff / c.n_expert_used, int64_t{1} << 31);
  if (c.arch == "qwen2moe") {
    c.n_ff_shexp =
        positiveKey(m, a + "expert_shared_feed_forward_length", c.n_ff, int64_t{1} << 31);
  }
  c.moe_norm_weights = c.arch != "qwen2moe";
  const int64_t groups = m.getIntOr(a + "expert_group_count", 0);
  if (groups > 1) {
    fail(ErrorCode::kUnsupported,
         "GGUF key '{}expert_group_count' = {}: grouped expert selection is not supported", a,
         groups);
  }
}

}  // namespace tpnode::model
