// ServerContext: what every connection of one ApiServer shares. Owned by ApiServer, which
// outlives its io_context and therefore every connection coroutine.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>

#include "node/api/api_metrics.h"
#include "node/api/api_options.h"
#include "node/api/connection_limit.h"
#include "node/api/response_store.h"
#include "node/api/response_store_worker.h"
#include "node/api/tap_budget.h"
#include "node/engine.h"

namespace tpnode::node::api {

// The engine requests in flight, so that ApiServer::stop() can cancel them. Thread-safe.
class InFlight {
 public:
  void add(uint64_t id) {
    std::lock_guard lock(mu_);
    ids_.insert(id);
  }
  void remove(uint64_t id) {
    std::lock_guard lock(mu_);
    ids_.erase(id);
  }
  std::set<uint64_t> all() const {
    std::lock_guard lock(mu_);
    return ids_;
  }

 private:
  mutable std::mutex mu_;
  std::set<uint64_t> ids_;  // guarded by mu_
};

// Calls to the Responses store queued at most (node/api/response_store_worker.h).
inline constexpr size_t kMaxQueuedStoreCalls = 64;

struct ServerContext {
  ServerContext(Engine& e, ApiOptions o)
      : engine(e),
        options(std::move(o)),
        // A queued call waits at most one store timeout (then fails as the store would).
        responses(makeResponseStore(options), kMaxQueuedStoreCalls, options.redis_timeout) {}

  Engine& engine;  // outlives the server (the caller's)
  const ApiOptions options;
  ApiMetrics metrics;
  InFlight in_flight;
  ConnectionLimit connections{options.max_connections};
  TapBudget taps{options.max_tap_requests, options.max_tap_bytes};
  ResponseStoreWorker responses;  // the Responses API's store, off the I/O threads
};

}  // namespace tpnode::node::api
