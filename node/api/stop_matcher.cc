#include "node/api/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace tpnode::node::api {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (auto& s : stops) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

std::string StopMatcher::push(std::string_view text) {
  if (matched_) return {};
  held_.append(text);
  if (stops_.empty()) return std::exchange(held_, {});

  // The earliest complete match wins.
  size_t first = std::string::npos;
  for (const auto& stop : stops_) first = std::min(first, held_.find(stop));
  if (first != std::string::npos) {
    matched_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // Hold back the longest tail that some stop sequence starts with.
  size_t keep = 0;
  for (const auto& stop : stops_) {
    size_t max_len = std::min(stop.size() - 1, held_.size());
    for (size_t len = max_len; len > keep; --len) {
      if (std::string_view(held_).substr(held_.size() - len) ==
          std::string_view(stop).substr(0, len)) {
        keep = len;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::flush() {
  if (matched_) return {};
  return std::exchange(held_, {});
}

}  // namespace tpnode::node::api
