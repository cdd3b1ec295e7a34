// Parsing of POST /v1/responses bodies (OpenAI's Responses API). Received bytes are hostile:
// every field is type- and range-checked and a bad one is 400 naming it (json_fields.h).
//
// Accepted: model, input (a string, or a list of message items: {"role": "user" | "system" |
// "developer" | "assistant", "content": a string or a list of input_text / output_text
// parts}, "type": "message" optional), instructions, previous_response_id, store, stream,
// max_output_tokens, temperature, top_p (and tpnode's sampling extensions: top_k, min_p, seed,
// presence/frequency/repeat penalties), metadata (at most 16 string pairs), user, truncation
// ("disabled" or "auto"), parallel_tool_calls, tool_choice "auto" / "none", text.format
// {"type": "text"}. Ignored: include, reasoning, service_tier, prompt_cache_key,
// safety_identifier, stream_options, and unknown fields. Refused with 400: tools, other item
// types (function calls, images, files, item references), background, conversation, prompt,
// a text.format other than text.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "node/api/api_options.h"
#include "node/engine.h"

namespace tpnode::node::api {

struct ResponsesRequest {
  std::string model;                        // empty: the served model
  std::vector<ChatMessage> input;           // the new items, in order ("developer" -> system)
  std::optional<std::string> instructions;  // a system message, not carried to the next turn
  std::string previous_response_id;         // empty: none
  bool store = true;
  bool stream = false;
  int max_output_tokens = -1;  // -1: not given
  SamplingOptions sampling;
  nlohmann::json metadata = nlohmann::json::object();
  std::optional<std::string> user;
  std::string truncation = "disabled";
  bool parallel_tool_calls = true;
  std::string tool_choice = "auto";
};

// Throws ApiError 400 (see above). Sampling fields the body omits take `defaults.sampling`.
ResponsesRequest parseResponsesRequest(const std::string& body,
                                       const RequestDefaults& defaults = {});

// The messages the model sees: the instructions (as a system message), then `previous` (the
// stored conversation that previous_response_id names), then the new input.
std::vector<ChatMessage> modelMessages(const ResponsesRequest& request,
                                       const std::vector<ChatMessage>& previous);

}  // namespace tpnode::node::api
