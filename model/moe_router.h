// Mixture-of-experts routing: which experts a token runs and with what weights, as llama.cpp's
// build_moe_ffn computes them for the softmax-gated architectures (qwen3moe, qwen2moe, Mixtral).
// Pure functions of the router logits; no I/O, table-tested (tests/model/moe_router_test.cc).
//
// For one token with router logits l[0..E):
//   p = softmax(l)               ggml_soft_max: exp(l - max) (ggml_v_expf per 16, libm's expf
//                                on the rest), summed in double, scaled by float(1 / sum)
//   top = the k largest p        ggml_argsort (descending) viewed to k: highest first
//   w_j = p[top_j]
//   normalize: w_j /= max(sum w, 2^-14)   (qwen3moe, Mixtral; qwen2moe keeps w as it is)
// Mixtral's "softmax over the selected top-k logits" is the same value (softmax is shift
// invariant), computed in this order.
#pragma once

#include <cstdint>

namespace tpnode::model {

// logits: [n_tokens][n_expert]; experts, weights: [n_tokens][k], experts in descending order of
// probability (ties: the lower expert id first). Requires 1 <= k <= n_expert.
void routeTokens(const float* logits, int64_t n_tokens, int64_t n_expert, int64_t k, bool normalize,
                 int32_t* experts, float* weights);

}  // namespace tpnode::model
