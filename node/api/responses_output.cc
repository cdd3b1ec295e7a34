#include "node/api/responses_output.h"

#include <chrono>

#include <fmt/format.h>
#include <openssl/rand.h>

#include "common/error.h"
#include "node/api/api_error.h"

namespace tpnode::node::api {

using nlohmann::json;

std::string newRandomId(const char* prefix) {
  unsigned char bytes[24];
  if (RAND_bytes(bytes, sizeof bytes) != 1) {
    throw Error(ErrorCode::kInternal, "RAND_bytes failed: no randomness for a response id");
  }
  std::string out = prefix;
  for (unsigned char b : bytes) out += fmt::format("{:02x}", b);
  return out;
}

ResponseFacts newResponseFacts(const ResponsesRequest& request, const std::string& model) {
  ResponseFacts f;
  f.id = newRandomId("resp_");
  f.message_id = newRandomId("msg_");
  f.created_at = std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  f.model = model;
  f.request = request;
  f.request.input.clear();
  return f;
}

std::string responseStatus(const ResponseOutcome& outcome) {
  if (outcome.finish_reason == "stop") return "completed";
  if (outcome.finish_reason == "length") return "incomplete";
  return "failed";
}

json outputTextPart(const std::string& text) {
  return {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}};
}

json messageItem(const ResponseFacts& facts, const std::string& status, const std::string& text) {
  json content = json::array();
  if (status != "in_progress" || !text.empty()) content.push_back(outputTextPart(text));
  return {{"type", "message"},
          {"id", facts.message_id},
          {"status", status},
          {"role", "assistant"},
          {"content", content}};
}

json responseObject(const ResponseFacts& f, const ResponseOutcome* outcome) {
  const ResponsesRequest& r = f.request;
  const std::string status = outcome ? responseStatus(*outcome) : "in_progress";
  json out = {
      {"id", f.id},
      {"object", "response"},
      {"created_at", f.created_at},
      {"status", status},
      {"error", nullptr},
      {"incomplete_details", nullptr},
      {"instructions", r.instructions ? json(*r.instructions) : json(nullptr)},
      {"max_output_tokens", r.max_output_tokens > 0 ? json(r.max_output_tokens) : json(nullptr)},
      {"model", f.model},
      {"output", json::array()},
      {"parallel_tool_calls", r.parallel_tool_calls},
      {"previous_response_id",
       r.previous_response_id.empty() ? json(nullptr) : json(r.previous_response_id)},
      {"reasoning", {{"effort", nullptr}, {"summary", nullptr}}},
      {"store", r.store},
      {"temperature", r.sampling.temperature},
      {"text", {{"format", {{"type", "text"}}}}},
      {"tool_choice", r.tool_choice},
      {"tools", json::array()},
      {"top_p", r.sampling.top_p},
      {"truncation", r.truncation},
      {"usage", nullptr},
      {"user", r.user ? json(*r.user) : json(nullptr)},
      {"metadata", r.metadata},
  };
  if (!outcome) return out;
  if (status == "failed") {
    out["error"] = {{"code", "server_error"}, {"message", outcome->error}};
  } else {
    out["output"].push_back(
        messageItem(f, status == "completed" ? "completed" : "incomplete", outcome->text));
  }
  if (status == "incomplete") out["incomplete_details"] = {{"reason", "max_output_tokens"}};
  out["usage"] = {{"input_tokens", outcome->input_tokens},
                  {"input_tokens_details", {{"cached_tokens", outcome->cached_tokens}}},
                  {"output_tokens", outcome->output_tokens},
                  {"output_tokens_details", {{"reasoning_tokens", 0}}},
                  {"total_tokens", outcome->input_tokens + outcome->output_tokens}};
  return out;
}

std::string ResponseEventStream::event(const char* type, json payload) {
  payload["type"] = type;
  payload["sequence_number"] = sequence_++;
  return fmt::format("event: {}\ndata: {}\n\n", type, dumpJson(payload));
}

}  // namespace tpnode::node::api
