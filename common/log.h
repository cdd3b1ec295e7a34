// Logging setup. All of tpnode logs through spdlog's default logger; messages start with the
// component in brackets ("[mesh] ...", "[model] ..."). Call initLogging once from main().
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

namespace tpnode {

// level: trace, debug, info, warn, error, critical, off. Throws Error(kInvalidArgument) when
// the name is unknown. `tag` (e.g. "n1") is printed on every line so that the logs of several
// nodes on one terminal can be told apart.
void initLogging(std::string_view level, std::string_view tag = {});

// For a message a retry loop may repeat: lets one through per `period` and counts the rest.
// pass() returns the number of messages held back since the last one that passed (log it with
// the message, e.g. "(12 more like it)"), or nothing when this one is to be held back.
// Thread-safe.
class LogLimiter {
 public:
  explicit LogLimiter(std::chrono::steady_clock::duration period = std::chrono::seconds(5))
      : period_(period) {}
  std::optional<uint64_t> pass() {
    std::lock_guard lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    if (last_ && now - *last_ < period_) {
      ++held_;
      return std::nullopt;
    }
    last_ = now;
    const uint64_t held = held_;
    held_ = 0;
    return held;
  }

 private:
  const std::chrono::steady_clock::duration period_;
  std::mutex mu_;
  std::optional<std::chrono::steady_clock::time_point> last_;  // GUARDED_BY(mu_)
  uint64_t held_ = 0;                                          // GUARDED_BY(mu_)
};

// " (N more like it since)" for N > 0, else "".
inline std::string heldBackNote(uint64_t held) {
  return held == 0 ? std::string() : " (" + std::to_string(held) + " more like it since)";
}

}  // namespace tpnode
