#include "node/api/generation_output.h"

namespace tpnode::node::api {

GenerationOutput::GenerationOutput(std::vector<std::string> stops, bool want_logprobs,
                                   int prompt_tokens)
    : stop_(std::move(stops)), want_logprobs_(want_logprobs), prompt_tokens_(prompt_tokens) {}

std::string GenerationOutput::pass(std::string_view piece) {
  return stop_.push(utf8_.push(piece));
}

Delta GenerationOutput::onEvent(const TokenEvent& event) {
  Delta delta;
  if (!event.taps.empty()) taps_ = event.taps;
  if (event.cached_tokens > 0) cached_tokens_ = event.cached_tokens;
  if (finished_) return delta;
  if (event.id >= 0) {
    ++completion_tokens_;
    delta.text = pass(event.text);
    if (want_logprobs_) delta.logprobs.push_back({event.text, event.logprob, event.top});
    if (stop_.matched()) {
      finished_ = true;
      finish_reason_ = "stop";
      return delta;
    }
  }
  if (!event.finished) return delta;

  finished_ = true;
  if (event.prompt_tokens > 0) prompt_tokens_ = event.prompt_tokens;
  if (event.completion_tokens > completion_tokens_) completion_tokens_ = event.completion_tokens;
  if (event.finish_reason == "length" || event.finish_reason == "stop") {
    finish_reason_ = event.finish_reason;
    delta.text += stop_.push(utf8_.finish());
    if (stop_.matched()) {
      finish_reason_ = "stop";
    } else {
      delta.text += stop_.flush();
    }
    return delta;
  }
  finish_reason_ = "error";
  error_ = event.finish_reason == "error" && !event.error.empty()
               ? event.error
               : "the generation was cancelled by the server (" + event.finish_reason + ")";
  return delta;
}

}  // namespace tpnode::node::api
