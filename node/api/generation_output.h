// GenerationOutput: turns the engine's TokenEvents for one request into what the client sees:
// complete UTF-8 text with stop sequences cut out, logprobs, the finish reason and usage.
//
// Contract
// - onEvent() is called for every event of the request, in order, until finished(). After
//   stopMatched() turns true the caller cancels the engine request and stops feeding events
//   (the generation is then finished with reason "stop").
// - Used by one connection; not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "node/api/stop_matcher.h"
#include "node/api/utf8_assembler.h"
#include "node/engine.h"

namespace tpnode::node::api {

struct LogprobEntry {
  std::string token;  // the token's bytes (may be part of a UTF-8 character)
  float logprob = 0;
  std::vector<TokenLogprob> top;
};

struct Delta {
  std::string text;                    // complete UTF-8
  std::vector<LogprobEntry> logprobs;  // one per token consumed by this event
  bool empty() const { return text.empty() && logprobs.empty(); }
};

class GenerationOutput {
 public:
  GenerationOutput(std::vector<std::string> stops, bool want_logprobs, int prompt_tokens);

  Delta onEvent(const TokenEvent& event);

  bool finished() const { return finished_; }
  bool stopMatched() const { return stop_.matched(); }
  // "stop" (EOS or a stop sequence), "length", or "error" (see error()).
  const std::string& finishReason() const { return finish_reason_; }
  const std::string& error() const { return error_; }
  int promptTokens() const { return prompt_tokens_; }
  int completionTokens() const { return completion_tokens_; }
  int cachedTokens() const { return cached_tokens_; }  // prompt tokens from the prefix cache
  bool anyToken() const { return completion_tokens_ > 0; }
  // The request's taps (TokenEvent::taps), once they arrived; empty before.
  const std::vector<TapResult>& taps() const { return taps_; }

 private:
  std::string pass(std::string_view piece);

  Utf8Assembler utf8_;
  StopMatcher stop_;
  bool want_logprobs_;
  int prompt_tokens_;
  int completion_tokens_ = 0;
  int cached_tokens_ = 0;
  bool finished_ = false;
  std::string finish_reason_;
  std::string error_;
  std::vector<TapResult> taps_;
};

}  // namespace tpnode::node::api
