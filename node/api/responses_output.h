// JSON of OpenAI's Responses API: the response object (GET /v1/responses/{id}, the answer of a
// non-streamed POST, and inside the streamed lifecycle events) and the server-sent events of a
// streamed one. Pure functions of their arguments, but for the random ids.
//
// Response object: {"id": "resp_...", "object": "response", "created_at", "status":
// "in_progress" | "completed" | "incomplete" | "failed", "error", "incomplete_details",
// "instructions", "max_output_tokens", "model", "output": [{"type": "message", "id":
// "msg_...", "status", "role": "assistant", "content": [{"type": "output_text", "text",
// "annotations": []}]}], "output_text" is not part of it (the SDKs derive it), "usage":
// {"input_tokens", "input_tokens_details": {"cached_tokens"}, "output_tokens",
// "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens"}, and the request's
// settings (previous_response_id, store, temperature, top_p, metadata, user, ...).
//
// Stream: "event: <type>\ndata: <json>\n\n" per event, each with "type" and a
// "sequence_number" from 0: response.created, response.in_progress,
// response.output_item.added, response.content_part.added, response.output_text.delta*,
// response.output_text.done, response.content_part.done, response.output_item.done, then
// response.completed | response.incomplete | response.failed (no "[DONE]").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "node/api/responses_request.h"

namespace tpnode::node::api {

// "<prefix>" + 48 random hex digits (OpenSSL's RAND_bytes): ids are unguessable.
std::string newRandomId(const char* prefix);

// What a response says besides its output.
struct ResponseFacts {
  std::string id;          // resp_...
  std::string message_id;  // msg_... (the output message)
  int64_t created_at = 0;  // unix seconds
  std::string model;
  ResponsesRequest request;  // its settings are echoed (input excluded)
};

// Fresh ids, now, for `request` served by `model`.
ResponseFacts newResponseFacts(const ResponsesRequest& request, const std::string& model);

// How a generation ended.
struct ResponseOutcome {
  std::string finish_reason;  // GenerationOutput's: "stop", "length", "error"
  std::string text;
  std::string error;  // with "error"
  int input_tokens = 0;
  int output_tokens = 0;
  int cached_tokens = 0;
};

// "completed" (stop), "incomplete" (length: max_output_tokens or the context), "failed".
std::string responseStatus(const ResponseOutcome& outcome);

// The response object; `outcome` nullptr: in progress (no output, usage null).
nlohmann::json responseObject(const ResponseFacts& facts, const ResponseOutcome* outcome);

// The output message item (`text` so far) and its output_text part.
nlohmann::json messageItem(const ResponseFacts& facts, const std::string& status,
                           const std::string& text);
nlohmann::json outputTextPart(const std::string& text);

// Numbers the events of one stream.
class ResponseEventStream {
 public:
  // "event: <type>\ndata: <payload + type + sequence_number>\n\n".
  std::string event(const char* type, nlohmann::json payload);

 private:
  int64_t sequence_ = 0;
};

}  // namespace tpnode::node::api
