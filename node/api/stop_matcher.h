// StopMatcher: finds OpenAI `stop` sequences in generated text that arrives in pieces.
//
// Contract
// - push(text) appends generated text (complete UTF-8) and returns what may be sent to the
//   client now: text that can no longer be the start of a stop sequence. The longest tail that
//   is a prefix of some stop sequence is held back.
// - When a stop sequence is found, matched() turns true, push() returns the text before it and
//   everything after it (and any later push) is dropped.
// - flush() returns the held-back tail at the end of a generation that did not match.
// - Empty stop strings are ignored. Not thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tpnode::node::api {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  std::string push(std::string_view text);
  std::string flush();
  bool matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool matched_ = false;
};

}  // namespace tpnode::node::api
