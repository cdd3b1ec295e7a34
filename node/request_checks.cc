#include "node/request_checks.h"

#include <random>

#include "common/error.h"

namespace tpnode::node {

model::SamplingParams samplingParams(const GenerationRequest& r) {
  const SamplingOptions& so = r.sampling;
  model::SamplingParams p;
  p.temperature = static_cast<float>(so.temperature);
  p.top_k = so.top_k;
  p.top_p = static_cast<float>(so.top_p);
  p.min_p = static_cast<float>(so.min_p);
  p.repeat_penalty = static_cast<float>(so.repeat_penalty);
  p.presence_penalty = static_cast<float>(so.presence_penalty);
  p.frequency_penalty = static_cast<float>(so.frequency_penalty);
  p.seed = so.seed ? *so.seed : std::random_device{}();
  p.logprobs = r.logprobs || r.top_logprobs > 0;
  p.top_logprobs = r.top_logprobs;
  return p;
}

void checkRequest(const GenerationRequest& request, int ctx, const model::ModelConfig& config) {
  if (request.prompt_ids.empty()) fail(ErrorCode::kInvalidArgument, "the prompt has no tokens");
  if (static_cast<int>(request.prompt_ids.size()) >= ctx) {
    fail(ErrorCode::kInvalidArgument,
         "the prompt has {} tokens but the context is {} per slot; shorten it or raise "
         "--ctx-size",
         request.prompt_ids.size(), ctx);
  }
  for (int32_t id : request.prompt_ids) {
    if (id < 0 || id >= config.n_vocab) {
      fail(ErrorCode::kInvalidArgument, "prompt token id {} is outside the vocabulary 0..{}", id,
           config.n_vocab - 1);
    }
  }
  if (request.max_tokens < 0) {
    fail(ErrorCode::kInvalidArgument, "max_tokens {} must be >= 0", request.max_tokens);
  }
  for (const model::TapSpec& t : request.taps) {
    if (t.point != model::TapPoint::kLogits && (t.layer < 0 || t.layer >= config.n_layer)) {
      fail(ErrorCode::kInvalidArgument, "tap layer {} is outside the model's layers 0..{}", t.layer,
           config.n_layer - 1);
    }
  }
  // Validate sampling parameters now, on the caller's thread (the error names the field).
  model::checkSamplingParams(samplingParams(request));
}

}  // namespace tpnode::node
