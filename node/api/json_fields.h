// Reading fields of a hostile JSON request body: each helper type-checks and range-checks one
// field and throws ApiError 400 naming the field and describing (never echoing much of) the
// value. Shared by the OpenAI request parsers (openai_request.h, responses_request.h).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "node/engine.h"

namespace tpnode::node::api {

// Parses a request body: 400 for a body nested deeper than kMaxJsonDepth (openai_request.h),
// invalid JSON, or one that is not an object.
nlohmann::json parseJsonBody(const std::string& body);

[[noreturn]] void wrongValue(const std::string& field, const nlohmann::json& value,
                             const char* expected);

// The field's value, or nullptr when absent or JSON null.
const nlohmann::json* field(const nlohmann::json& body, const char* name);

double numberField(const nlohmann::json& body, const char* name, double lo, double hi,
                   double fallback);
// Integers may also arrive as integral floats (16.0).
int64_t integerField(const nlohmann::json& body, const char* name, int64_t lo, int64_t hi,
                     int64_t fallback);
bool boolField(const nlohmann::json& body, const char* name, bool fallback);
// A string field; `fallback` when absent.
std::string stringField(const nlohmann::json& body, const char* name, const std::string& fallback);

// temperature, top_p, top_k, min_p, presence/frequency/repeat penalties, seed; omitted ones
// take `defaults`.
SamplingOptions parseSampling(const nlohmann::json& body, const SamplingOptions& defaults);

}  // namespace tpnode::node::api
