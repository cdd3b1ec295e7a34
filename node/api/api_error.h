// ApiError: an HTTP error answer in OpenAI's shape:
//   {"error": {"message": "...", "type": "invalid_request_error", "param": "temperature",
//              "code": null}}
// Request handlers throw it; the connection turns it into the response. The message names the
// field and the value received, and says what is accepted.
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace tpnode::node::api {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string type = "invalid_request_error",
           std::string param = {}, std::string code = {})
      : std::runtime_error(message),
        status_(status),
        type_(std::move(type)),
        param_(std::move(param)),
        code_(std::move(code)) {}

  int status() const { return status_; }
  // The JSON body ({"error": {...}}).
  nlohmann::json body() const;

 private:
  int status_;
  std::string type_, param_, code_;
};

// 400 invalid_request_error naming `param`.
[[noreturn]] void badRequest(const std::string& param, const std::string& message);

// The ApiError for an engine failure: kInvalidArgument -> 400, kUnsupported -> 400,
// kPeerLost / kAborted / kTimeout / kResource -> 503, anything else -> 500.
ApiError fromEngineError(const Error& e);

// A JSON value for an error message: a scalar as JSON text (at most ~80 characters), an array
// or object only by its type and size ("an array of 3 items"), never its contents.
std::string describeValue(const nlohmann::json& value);

// JSON text that is always valid UTF-8 (invalid bytes become U+FFFD).
std::string dumpJson(const nlohmann::json& value);

}  // namespace tpnode::node::api
