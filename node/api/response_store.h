// ResponseStore: where POST /v1/responses keeps the responses it answers with "store": true,
// so that GET/DELETE /v1/responses/{id} find them and a request with previous_response_id
// continues the conversation: in this process's memory (memory_response_store.h) or in Redis
// (redis_response_store.h), which lets a conversation continue on another node-0 server.
//
// Contract
// - Implementations are thread-safe (HTTP threads call them concurrently).
// - put/get/remove throw tpnode::Error when the backing store fails (Redis down or slow: kIo,
//   kTimeout; a damaged entry: kInvalidData); the handler answers 503 for a lookup and logs a
//   failed put (the answer itself is still given). They never hang longer than the store's
//   timeout. The HTTP handlers call them through a ResponseStoreWorker
//   (node/api/response_store_worker.h), never on an I/O thread when mayBlock().
// - Entries are immutable once put; ids are unguessable ("resp_" + 48 random hex digits) and
//   are the only access check beyond the API key (every key sees every stored response).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "node/engine.h"

namespace tpnode::node::api {

struct ApiOptions;

struct StoredResponse {
  std::string id;
  nlohmann::json response;                // the response object, as GET answers it
  std::vector<ChatMessage> conversation;  // the input items before it and its output
};

// JSON text: {"v": 1, "id", "response", "conversation": [{"role", "content"}, ...]}.
std::string encodeStoredResponse(const StoredResponse& r);
// Received bytes are hostile: nullopt for anything that is not such a text with `id`.
std::optional<StoredResponse> decodeStoredResponse(std::string_view text, const std::string& id);

class ResponseStore {
 public:
  virtual ~ResponseStore() = default;
  virtual void put(const StoredResponse& response) = 0;
  virtual std::optional<StoredResponse> get(const std::string& id) = 0;
  // Whether it existed.
  virtual bool remove(const std::string& id) = 0;
  // "memory (64 MiB)", "redis://host:port/0": for logs.
  virtual std::string describe() const = 0;
  // Whether a call may wait on the network (then node/api/response_store_worker.h runs it off
  // the HTTP I/O threads).
  virtual bool mayBlock() const { return false; }
};

// The store ApiOptions asks for (redis when responses_redis is set, else memory).
std::unique_ptr<ResponseStore> makeResponseStore(const ApiOptions& options);

}  // namespace tpnode::node::api
