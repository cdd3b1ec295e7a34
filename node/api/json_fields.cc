#include "node/api/json_fields.h"

#include <cmath>

#include <fmt/format.h>

#include "node/api/api_error.h"
#include "node/api/openai_request.h"

namespace tpnode::node::api {

using nlohmann::json;

json parseJsonBody(const std::string& body_text) {
  if (jsonNestingDepth(body_text, kMaxJsonDepth) > kMaxJsonDepth) {
    throw ApiError(400,
                   fmt::format("the request body nests arrays and objects deeper than {} levels",
                               kMaxJsonDepth),
                   "invalid_request_error", "", "json_too_deep");
  }
  json body;
  try {
    body = json::parse(body_text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for 1e400
    // The library's message quotes the offending token (control characters spelled out as
    // <U+000A>): shortened, so that an answer never echoes much of the body.
    std::string detail = e.what();
    constexpr size_t kMaxDetail = 200;
    if (detail.size() > kMaxDetail) detail = detail.substr(0, kMaxDetail) + "...";
    throw ApiError(400, fmt::format("the request body is not valid JSON: {}", detail),
                   "invalid_request_error", "", "invalid_json");
  }
  if (!body.is_object()) {
    throw ApiError(400, "the request body must be a JSON object", "invalid_request_error");
  }
  return body;
}

void wrongValue(const std::string& field, const json& value, const char* expected) {
  badRequest(field, fmt::format("'{}' must be {}, got {}", field, expected, describeValue(value)));
}

const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

double numberField(const json& body, const char* name, double lo, double hi, double fallback) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number()) wrongValue(name, *v, fmt::format("a number in [{}, {}]", lo, hi).c_str());
  double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) {
    wrongValue(name, *v, fmt::format("a number in [{}, {}]", lo, hi).c_str());
  }
  return d;
}

int64_t integerField(const json& body, const char* name, int64_t lo, int64_t hi, int64_t fallback) {
  const json* v = field(body, name);
  if (!v) return fallback;
  std::string expected = fmt::format("an integer in [{}, {}]", lo, hi);
  if (v->is_number_integer()) {
    if (v->is_number_unsigned()) {
      auto u = v->get<uint64_t>();
      if (u > static_cast<uint64_t>(hi) || static_cast<int64_t>(u) < lo) {
        wrongValue(name, *v, expected.c_str());
      }
      return static_cast<int64_t>(u);
    }
    auto i = v->get<int64_t>();
    if (i < lo || i > hi) wrongValue(name, *v, expected.c_str());
    return i;
  }
  if (v->is_number_float()) {
    double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && d >= static_cast<double>(lo) &&
        d <= static_cast<double>(hi)) {
      return static_cast<int64_t>(d);
    }
  }
  wrongValue(name, *v, expected.c_str());
}

bool boolField(const json& body, const char* name, bool fallback) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_boolean()) wrongValue(name, *v, "true or false");
  return v->get<bool>();
}

std::string stringField(const json& body, const char* name, const std::string& fallback) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_string()) wrongValue(name, *v, "a string");
  return v->get<std::string>();
}

SamplingOptions parseSampling(const json& body, const SamplingOptions& d) {
  SamplingOptions s = d;
  s.temperature = numberField(body, "temperature", 0, 2, d.temperature);
  s.top_p = numberField(body, "top_p", 0, 1, d.top_p);
  s.top_k = static_cast<int>(integerField(body, "top_k", -1, 1 << 20, d.top_k));
  if (s.top_k < 0) s.top_k = 0;  // vLLM's -1 means off
  s.min_p = numberField(body, "min_p", 0, 1, d.min_p);
  s.presence_penalty = numberField(body, "presence_penalty", -2, 2, d.presence_penalty);
  s.frequency_penalty = numberField(body, "frequency_penalty", -2, 2, d.frequency_penalty);
  s.repeat_penalty = numberField(body, "repeat_penalty", 0.01, 10, d.repeat_penalty);
  if (const json* seed = field(body, "seed")) {
    if (!seed->is_number_integer()) wrongValue("seed", *seed, "an integer");
    s.seed = seed->is_number_unsigned() ? seed->get<uint64_t>()
                                        : static_cast<uint64_t>(seed->get<int64_t>());
  }
  return s;
}

}  // namespace tpnode::node::api
