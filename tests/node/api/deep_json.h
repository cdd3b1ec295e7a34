// Test helper: request bodies of both OpenAI endpoints with a hostile value in every place a
// value can sit, for the parser's unit tests and the API's multi-process tests.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "node/api/openai_request.h"

namespace tpnode::node::api::testing {

// Every place a value can sit in a request of each endpoint, as a body with "@" where the value
// goes (top-level fields, nested fields, array items, and an unknown field).
inline std::vector<std::pair<Endpoint, std::string>> everyFieldTemplate() {
  std::vector<std::pair<Endpoint, std::string>> out;
  const char* top[] = {"model",
                       "max_tokens",
                       "temperature",
                       "top_p",
                       "top_k",
                       "min_p",
                       "presence_penalty",
                       "frequency_penalty",
                       "repeat_penalty",
                       "seed",
                       "stop",
                       "n",
                       "echo",
                       "best_of",
                       "tools",
                       "functions",
                       "stream",
                       "stream_options",
                       "logprobs",
                       "top_logprobs",
                       "ignore_eos",
                       "taps",
                       "tap_encoding",
                       "unknown_field",
                       "max_completion_tokens"};
  for (const char* f : top) {
    out.push_back({Endpoint::kCompletions, fmt::format(R"({{"prompt": "hi", "{}": @}})", f)});
    out.push_back(
        {Endpoint::kChat,
         fmt::format(R"({{"messages": [{{"role": "user", "content": "hi"}}], "{}": @}})", f)});
  }
  for (const char* t : {R"({"prompt": @})", R"({"prompt": [@]})", R"({"prompt": [1, @]})",
                        R"({"prompt": "hi", "stop": ["a", @]})",
                        R"({"prompt": "hi", "stream_options": {"include_usage": @}})",
                        R"({"prompt": "hi", "taps": [@]})",
                        R"({"prompt": "hi", "taps": [{"layer": @, "point": "residual"}]})",
                        R"({"prompt": "hi", "taps": [{"layer": 0, "point": @}]})", "@"}) {
    out.push_back({Endpoint::kCompletions, t});
  }
  for (
      const char* t :
      {R"({"messages": @})", R"({"messages": [@]})",
       R"({"messages": [{"role": @, "content": "x"}]})",
       R"({"messages": [{"role": "user", "content": @}]})",
       R"({"messages": [{"role": "user", "content": [@]}]})",
       R"({"messages": [{"role": "user", "content": [{"type": @, "text": "x"}]}]})",
       R"({"messages": [{"role": "user", "content": [{"type": "text", "text": @}]}]})",
       R"({"messages": [{"role": "user", "content": "x"}], "stream_options": {"include_usage": @}})",
       "@"}) {
    out.push_back({Endpoint::kChat, t});
  }
  return out;
}

// `depth` nested arrays ([[[...]]]) or objects ({"a": {"a": ... 1}}).
inline std::string nested(int depth, bool objects) {
  std::string s;
  s.reserve(static_cast<size_t>(depth) * 6 + 1);
  for (int i = 0; i < depth; ++i) s += objects ? R"({"a":)" : "[";
  s += objects ? "1" : "";
  for (int i = 0; i < depth; ++i) s += objects ? "}" : "]";
  return s;
}

inline std::string withValue(std::string body, const std::string& value) {
  return body.replace(body.find('@'), 1, value);
}

// The path of an endpoint.
inline const char* endpointPath(Endpoint ep) {
  return ep == Endpoint::kChat ? "/v1/chat/completions" : "/v1/completions";
}

}  // namespace tpnode::node::api::testing
