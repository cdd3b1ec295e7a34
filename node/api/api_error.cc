#include "node/api/api_error.h"

#include <fmt/format.h>

namespace tpnode::node::api {

nlohmann::json ApiError::body() const {
  nlohmann::json e = {{"message", what()}, {"type", type_}};
  e["param"] = param_.empty() ? nlohmann::json(nullptr) : nlohmann::json(param_);
  e["code"] = code_.empty() ? nlohmann::json(nullptr) : nlohmann::json(code_);
  return {{"error", e}};
}

void badRequest(const std::string& param, const std::string& message) {
  throw ApiError(400, message, "invalid_request_error", param);
}

ApiError fromEngineError(const Error& e) {
  switch (e.code()) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kInvalidData:
      return ApiError(400, e.what(), "invalid_request_error");
    case ErrorCode::kUnsupported:
      return ApiError(400, e.what(), "invalid_request_error", "", "unsupported");
    case ErrorCode::kPeerLost:
    case ErrorCode::kAborted:
    case ErrorCode::kTimeout:
    case ErrorCode::kResource:
      return ApiError(503, e.what(), "service_unavailable", "", "cluster_unavailable");
    default:
      return ApiError(500, e.what(), "server_error");
  }
}

std::string describeValue(const nlohmann::json& value) {
  if (value.is_array()) {
    return value.size() == 1 ? "an array of 1 item"
                             : fmt::format("an array of {} items", value.size());
  }
  if (value.is_object()) {
    return value.size() == 1 ? "an object with 1 key"
                             : fmt::format("an object with {} keys", value.size());
  }
  std::string text = dumpJson(value);
  constexpr size_t kMax = 80;
  if (text.size() > kMax) text = text.substr(0, kMax) + "...";
  return text;
}

std::string dumpJson(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tpnode::node::api
