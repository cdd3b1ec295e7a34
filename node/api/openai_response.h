// JSON bodies of OpenAI responses: the final object of a non-streamed request and the chunks
// of a streamed one (object "text_completion" for /v1/completions, "chat.completion" /
// "chat.completion.chunk" for chat). Pure functions of their arguments.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "node/api/generation_output.h"
#include "node/api/openai_request.h"

namespace tpnode::node::api {

struct ResponseMeta {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string id;  // cmpl-... / chatcmpl-...
  int64_t created = 0;
  std::string model;
  bool logprobs = false;
  int top_logprobs = 0;
  bool taps = false;  // the request asked for taps: the whole answer carries "taps"
  bool taps_base64 = false;
};

// A fresh id with the endpoint's prefix and 24 random hex digits.
std::string newResponseId(Endpoint endpoint);

// The "logprobs" value of a choice for these tokens. `text_offset` (completions only) is the
// offset of the first token in the generated text; it is advanced past them.
nlohmann::json logprobsJson(const ResponseMeta& meta, const std::vector<LogprobEntry>& entries,
                            int64_t& text_offset);

// One streamed chunk. `finish_reason` empty: none yet. `role_chunk` (chat): the first chunk,
// whose delta carries the role. `usage_null`: add "usage": null (stream_options.include_usage).
nlohmann::json streamChunk(const ResponseMeta& meta, const std::string& text,
                           const nlohmann::json& logprobs, const std::string& finish_reason,
                           bool role_chunk, bool usage_null);

// The last chunk when stream_options.include_usage: no choices, the usage (with
// prompt_tokens_details.cached_tokens: prompt tokens served from the prefix cache).
nlohmann::json usageChunk(const ResponseMeta& meta, int prompt_tokens, int completion_tokens,
                          int cached_tokens = 0);

// The "taps" value (tpnode extension): one object per tap, in request order:
// {"layer": L (null for logits), "point": "...", "shape": [rows, cols], "data": [[...], ...]};
// with `base64`: "encoding": "base64", "dtype": "<f4" and "data" the base64 of the rows as
// little-endian f32, row-major.
nlohmann::json tapsJson(const std::vector<TapResult>& taps, bool base64 = false);

// The whole answer of a non-streamed request.
nlohmann::json finalResponse(const ResponseMeta& meta, const std::string& text,
                             const nlohmann::json& logprobs, const std::string& finish_reason,
                             int prompt_tokens, int completion_tokens, int cached_tokens = 0);

}  // namespace tpnode::node::api
