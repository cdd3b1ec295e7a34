// RedisResponseStore: the Responses API's store in Redis (--responses-store-redis-url), shared
// by every node-0 server that uses the same Redis, so that a conversation continues on any of
// them. Key "tpnode:resp:1:<id>", value encodeStoredResponse(), expiring after `ttl`. Replies
// are capped at `max_bytes` (a larger or damaged value is kInvalidData). Thread-safe; calls
// are bounded by the client's timeout and throw as ResponseStore says.
#pragma once

#include <chrono>

#include "node/api/response_store.h"
#include "node/redis/redis_client.h"

namespace tpnode::node::api {

class RedisResponseStore final : public ResponseStore {
 public:
  RedisResponseStore(const redis::RedisEndpoint& endpoint, std::chrono::milliseconds timeout,
                     std::chrono::seconds ttl, size_t max_bytes);

  void put(const StoredResponse& response) override;
  std::optional<StoredResponse> get(const std::string& id) override;
  bool remove(const std::string& id) override;
  std::string describe() const override;
  bool mayBlock() const override { return true; }

  static std::string key(const std::string& id) { return "tpnode:resp:1:" + id; }

 private:
  const std::chrono::seconds ttl_;
  const size_t max_bytes_;
  redis::RedisClient client_;
};

}  // namespace tpnode::node::api
