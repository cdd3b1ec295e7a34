// tpnode's one error model.
//
// Contract:
// - Module APIs report failure by throwing tpnode::Error, which carries an ErrorCode and a
//   human-readable message that names the field, the value and what to do about it.
// - Broken internal invariants use TP_CHECK (common/check.h), which throws an Error with
//   ErrorCode::kInternal and the file and line.
// - I/O handlers and background threads never let an Error escape: they store the first one
//   and the owner rethrows it on the caller's thread (see mesh/).
// - Received bytes are hostile: a malformed input is ErrorCode::kInvalidData, never an abort.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace tpnode {

enum class ErrorCode {
  kInvalidArgument,  // the caller (a flag, a config field, an API argument) asked for something bad
  kInvalidData,      // received or loaded bytes are malformed (a frame, a GGUF file, JSON)
  kMismatch,         // two sides disagree (handshake fingerprint, version, model identity)
  kAuth,             // authentication failed (secret, certificate, API key)
  kTimeout,          // a deadline passed
  kIo,               // the operating system said no (socket, file)
  kPeerLost,         // a peer died or was cut off
  kAborted,          // the operation was cancelled by shutdown
  kUnsupported,      // valid but not implemented (a tensor type, an architecture)
  kResource,         // out of memory, devices, slots
  kInternal,         // a broken invariant: a bug in tpnode
};

std::string_view errorCodeName(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}

  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

// Throws Error(code, fmt::format(fmt, args...)).
template <typename... Args>
[[noreturn]] void fail(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(code, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace tpnode
