#include "node/api/responses_request.h"

#include <fmt/format.h>

#include "node/api/api_error.h"
#include "node/api/json_fields.h"

namespace tpnode::node::api {
namespace {

using nlohmann::json;

constexpr size_t kMaxInputItems = 4096;
constexpr size_t kMaxMetadata = 16;
constexpr size_t kMaxMetadataKey = 64;
constexpr size_t kMaxMetadataValue = 512;

[[noreturn]] void unsupported(const std::string& param, const std::string& message) {
  throw ApiError(400, message, "invalid_request_error", param, "unsupported");
}

std::string itemText(const json& content, const std::string& name) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    wrongValue(name, content, "a string or a list of input_text / output_text parts");
  }
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string part_name = fmt::format("{}[{}]", name, i);
    const json* type = part.is_object() ? field(part, "type") : nullptr;
    if (!type || !type->is_string()) {
      wrongValue(part_name, part, "an object {\"type\": \"input_text\", \"text\": ...}");
    }
    const std::string t = type->get<std::string>();
    if (t != "input_text" && t != "output_text" && t != "text") {
      unsupported(part_name + ".type",
                  fmt::format("content parts of type {} are not supported (only input_text and "
                              "output_text)",
                              describeValue(*type)));
    }
    const json* value = field(part, "text");
    if (!value || !value->is_string()) {
      wrongValue(part_name + ".text", value ? *value : json(nullptr), "a string");
    }
    text += value->get<std::string>();
  }
  return text;
}

ChatMessage inputItem(const json& item, size_t index) {
  const std::string name = fmt::format("input[{}]", index);
  if (!item.is_object()) wrongValue(name, item, "a message object {\"role\", \"content\"}");
  if (const json* type = field(item, "type")) {
    if (!type->is_string()) wrongValue(name + ".type", *type, "a string");
    if (*type != "message") {
      unsupported(name + ".type", fmt::format("input items of type {} are not supported (only "
                                              "messages)",
                                              describeValue(*type)));
    }
  }
  const json* role = field(item, "role");
  static const char* kRoles[] = {"user", "system", "developer", "assistant"};
  bool known = false;
  if (role && role->is_string()) {
    for (const char* r : kRoles) known |= *role == r;
  }
  if (!known) {
    wrongValue(name + ".role", role ? *role : json(nullptr),
               "one of \"user\", \"system\", \"developer\", \"assistant\"");
  }
  const json* content = field(item, "content");
  if (!content) wrongValue(name + ".content", json(nullptr), "a string or a list of parts");
  ChatMessage m;
  m.role = *role == "developer" ? "system" : role->get<std::string>();
  m.content = itemText(*content, name + ".content");
  return m;
}

void parseInput(const json& body, ResponsesRequest& r) {
  const json* v = field(body, "input");
  if (!v) badRequest("input", "'input' is required: a string or a list of messages");
  if (v->is_string()) {
    r.input.push_back({"user", v->get<std::string>()});
    return;
  }
  if (!v->is_array() || v->empty() || v->size() > kMaxInputItems) {
    wrongValue("input", *v, "a string or a non-empty list of at most 4096 messages");
  }
  for (size_t i = 0; i < v->size(); ++i) r.input.push_back(inputItem((*v)[i], i));
}

void parseMetadata(const json& body, ResponsesRequest& r) {
  const json* v = field(body, "metadata");
  if (!v) return;
  if (!v->is_object() || v->size() > kMaxMetadata) {
    wrongValue("metadata", *v, "an object of at most 16 string values");
  }
  for (const auto& [key, value] : v->items()) {
    if (key.size() > kMaxMetadataKey || !value.is_string() ||
        value.get<std::string>().size() > kMaxMetadataValue) {
      wrongValue("metadata", *v,
                 "an object of at most 16 keys (64 characters) with string values (512 "
                 "characters)");
    }
  }
  r.metadata = *v;
}

void refuseUnsupported(const json& body, ResponsesRequest& r) {
  if (const json* tools = field(body, "tools"); tools && !(tools->is_array() && tools->empty())) {
    unsupported("tools", "'tools' (tool calling) is not supported");
  }
  if (boolField(body, "background", false)) {
    unsupported("background", "'background': true is not supported");
  }
  for (const char* name : {"conversation", "prompt"}) {
    if (field(body, name)) unsupported(name, fmt::format("'{}' is not supported", name));
  }
  if (const json* choice = field(body, "tool_choice")) {
    if (!choice->is_string() || (*choice != "auto" && *choice != "none")) {
      unsupported("tool_choice", "'tool_choice' may only be \"auto\" or \"none\" (no tools)");
    }
    r.tool_choice = choice->get<std::string>();
  }
  if (const json* text = field(body, "text")) {
    const json* format = text->is_object() ? field(*text, "format") : nullptr;
    if (!text->is_object()) wrongValue("text", *text, "an object {\"format\": {\"type\": ...}}");
    if (format) {
      const json* type = format->is_object() ? field(*format, "type") : nullptr;
      if (!type || *type != "text") {
        unsupported("text.format",
                    "'text.format' may only be {\"type\": \"text\"} (structured "
                    "output is not supported)");
      }
    }
  }
  r.truncation = stringField(body, "truncation", "disabled");
  if (r.truncation != "disabled" && r.truncation != "auto") {
    wrongValue("truncation", body["truncation"], "\"disabled\" or \"auto\"");
  }
  r.parallel_tool_calls = boolField(body, "parallel_tool_calls", true);
}

}  // namespace

ResponsesRequest parseResponsesRequest(const std::string& body_text,
                                       const RequestDefaults& defaults) {
  json body = parseJsonBody(body_text);
  ResponsesRequest r;
  r.model = stringField(body, "model", "");
  refuseUnsupported(body, r);
  parseInput(body, r);
  if (const json* v = field(body, "instructions")) {
    if (!v->is_string()) wrongValue("instructions", *v, "a string");
    r.instructions = v->get<std::string>();
  }
  r.previous_response_id = stringField(body, "previous_response_id", "");
  r.store = boolField(body, "store", true);
  r.stream = boolField(body, "stream", false);
  constexpr int64_t kMaxTokens = 1 << 24;
  r.max_output_tokens =
      static_cast<int>(integerField(body, "max_output_tokens", 1, kMaxTokens, -1));
  r.sampling = parseSampling(body, defaults.sampling);
  parseMetadata(body, r);
  if (const json* user = field(body, "user")) {
    if (!user->is_string()) wrongValue("user", *user, "a string");
    r.user = user->get<std::string>();
  }
  return r;
}

std::vector<ChatMessage> modelMessages(const ResponsesRequest& request,
                                       const std::vector<ChatMessage>& previous) {
  std::vector<ChatMessage> out;
  if (request.instructions) out.push_back({"system", *request.instructions});
  out.insert(out.end(), previous.begin(), previous.end());
  out.insert(out.end(), request.input.begin(), request.input.end());
  return out;
}

}  // namespace tpnode::node::api
