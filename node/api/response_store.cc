#include "node/api/response_store.h"

#include "node/api/api_options.h"
#include "node/api/memory_response_store.h"
#include "node/api/openai_request.h"
#include "node/api/redis_response_store.h"

namespace tpnode::node::api {

using nlohmann::json;

std::string encodeStoredResponse(const StoredResponse& r) {
  json conversation = json::array();
  for (const ChatMessage& m : r.conversation) {
    conversation.push_back({{"role", m.role}, {"content", m.content}});
  }
  json doc = {{"v", 1}, {"id", r.id}, {"response", r.response}, {"conversation", conversation}};
  // Invalid UTF-8 in generated text is replaced, as in every answer.
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::optional<StoredResponse> decodeStoredResponse(std::string_view text, const std::string& id) {
  if (jsonNestingDepth(text, kMaxJsonDepth) > kMaxJsonDepth) return std::nullopt;
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || doc.value("v", 0) != 1 || !doc.contains("id") || doc["id"] != id ||
      !doc.contains("response") || !doc["response"].is_object() || !doc.contains("conversation") ||
      !doc["conversation"].is_array()) {
    return std::nullopt;
  }
  StoredResponse r;
  r.id = id;
  r.response = std::move(doc["response"]);
  for (const json& m : doc["conversation"]) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string()) {
      return std::nullopt;
    }
    r.conversation.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  }
  return r;
}

std::unique_ptr<ResponseStore> makeResponseStore(const ApiOptions& o) {
  if (o.responses_redis) {
    return std::make_unique<RedisResponseStore>(*o.responses_redis, o.redis_timeout,
                                                o.responses_ttl, o.responses_max_value_bytes);
  }
  return std::make_unique<MemoryResponseStore>(o.responses_max_bytes);
}

}  // namespace tpnode::node::api
