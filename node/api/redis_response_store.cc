#include "node/api/redis_response_store.h"

#include <fmt/format.h>

namespace tpnode::node::api {

RedisResponseStore::RedisResponseStore(const redis::RedisEndpoint& endpoint,
                                       std::chrono::milliseconds timeout, std::chrono::seconds ttl,
                                       size_t max_bytes)
    : ttl_(ttl),
      max_bytes_(max_bytes),
      client_(redis::RedisClientOptions{endpoint, timeout, max_bytes + 64,
                                        std::chrono::milliseconds(100),
                                        std::chrono::milliseconds(5000), "responses-redis"}) {}

void RedisResponseStore::put(const StoredResponse& response) {
  std::string text = encodeStoredResponse(response);
  if (text.size() > max_bytes_) {
    throw Error(ErrorCode::kResource,
                fmt::format("response {} is {} bytes, over the store's {} byte cap", response.id,
                            text.size(), max_bytes_));
  }
  client_.set(key(response.id), text, ttl_);
}

std::optional<StoredResponse> RedisResponseStore::get(const std::string& id) {
  std::optional<std::string> text = client_.get(key(id));
  if (!text) return std::nullopt;
  std::optional<StoredResponse> r = decodeStoredResponse(*text, id);
  if (!r) {
    throw Error(ErrorCode::kInvalidData,
                fmt::format("the stored value of response {} is damaged", id));
  }
  return r;
}

bool RedisResponseStore::remove(const std::string& id) {
  return client_.del(key(id));
}

std::string RedisResponseStore::describe() const {
  return client_.options().endpoint.describe();
}

}  // namespace tpnode::node::api
