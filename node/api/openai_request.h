// Parsing and checking of the OpenAI request bodies of POST /v1/completions and
// POST /v1/chat/completions. Received bytes are hostile: every field is type-checked and
// range-checked; a bad one throws ApiError (400, naming the field and the value). Unknown
// fields are ignored (as vLLM does); fields we cannot honour (n > 1, echo, best_of > 1,
// tools, a response_format other than text) are refused.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "node/api/api_options.h"
#include "node/engine.h"

namespace tpnode::node::api {

enum class Endpoint { kCompletions, kChat };

struct OpenAiRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;  // empty: not given (the served model)
  // Completions: text (tokenized with special tokens added) or token ids (used as they are).
  std::string prompt_text;
  std::vector<int32_t> prompt_ids;
  bool prompt_is_ids = false;
  std::vector<ChatMessage> messages;  // chat
  int max_tokens = -1;                // -1: not given
  SamplingOptions sampling;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;        // stream_options.include_usage
  bool logprobs = false;             // report logprobs of the chosen tokens
  int top_logprobs = 0;              // alternatives per token (0..20)
  bool ignore_eos = false;           // vLLM / llama.cpp extension
  std::vector<model::TapSpec> taps;  // tpnode extension (docs/inspection.md); not with stream
  bool taps_base64 = false;          // "tap_encoding": "base64" (f32 little endian)
};

// Arrays and objects may nest at most this deep in a request body (the body itself is level 1);
// deeper bodies get 400 before they are parsed, so no later step (copy, compare, dump) can
// recurse without bound. The body's size is bounded by ApiOptions::max_body_bytes.
inline constexpr int kMaxJsonDepth = 64;

// The deepest nesting of arrays and objects in `text`, counting only brackets outside strings;
// stops counting once it passes `limit` (returns limit + 1 then). Linear, no allocation.
int jsonNestingDepth(std::string_view text, int limit);

// Parses `body` (the raw HTTP body); sampling fields it omits take `defaults.sampling`.
// Throws ApiError: 400 for invalid JSON, a body nested deeper than kMaxJsonDepth, or a bad field
// (the message shows a scalar value, or only the type and size of an array or object).
OpenAiRequest parseOpenAiRequest(Endpoint endpoint, const std::string& body,
                                 const RequestDefaults& defaults = {});

// The activation values the taps of a request produce: prompt tokens x (n_embd, or n_vocab for
// "logits") per tap.
uint64_t tapValueCount(const std::vector<model::TapSpec>& taps, int64_t n_prompt,
                       const ModelInfo& model);

// Tokenizes (rendering chat messages through the engine's template), checks the model name
// (404 when unknown), the prompt's token ids and the context length, and fills in defaults:
// an omitted max_tokens is defaults.max_tokens (the server's -n) or else 16 for completions
// (OpenAI) and 1024 for chat, in every case at most the room the context has left; a given
// max_tokens beyond that room is 400 context_length_exceeded. Throws ApiError.
GenerationRequest prepareGeneration(const OpenAiRequest& request, const Engine& engine,
                                    const ModelInfo& model, const RequestDefaults& defaults = {});

}  // namespace tpnode::node::api
