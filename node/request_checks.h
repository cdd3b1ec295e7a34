// Request checks: what node 0 refuses before a generation request is queued (an empty or
// too-long prompt, token ids outside the vocabulary, a negative max_tokens, tap layers outside
// the model, bad sampling values), and the sampling parameters a request asks for.
//
// Contract: pure functions, called on the submitting (HTTP) thread before the request reaches
// the loop thread, and by the loop thread to build each request's sampler.
#pragma once

#include "model/config.h"
#include "model/sampling.h"
#include "node/engine.h"

namespace tpnode::node {

// Throws Error(kInvalidArgument) naming the field and the value. `ctx` is the positions per
// slot (--ctx-size).
void checkRequest(const GenerationRequest& request, int ctx, const model::ModelConfig& config);

// The request's sampling parameters; without a seed, a fresh random one.
model::SamplingParams samplingParams(const GenerationRequest& r);

}  // namespace tpnode::node
