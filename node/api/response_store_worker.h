// ResponseStoreWorker: runs the Responses API's store calls (node/api/response_store.h) off the
// HTTP I/O threads. A store that may block on the network (Redis: up to --redis-timeout per
// call) gets one thread of its own with a bounded queue; the connection's coroutine waits for
// the call without holding its I/O thread, so every other connection on that thread is served
// meanwhile. A store that never blocks (memory) is called in place.
//
// Contract
// - Owned by the ServerContext; put/get/remove are awaited by connection coroutines (any
//   strand); each resumes on the awaiting coroutine's executor. Results and errors are those of
//   ResponseStore (tpnode::Error: kIo, kTimeout, kInvalidData, kResource), plus:
//   Error(kResource) at once when `max_queued` calls are already waiting (a slow or hung
//   store), and Error(kTimeout) for a call that waited longer than `max_wait` in the queue (it
//   is not run). So a call's answer takes at most about max_wait plus the store's own bound.
// - stop() (ApiServer::stop, after the I/O threads are joined and before the io_context is
//   destroyed; idempotent, the destructor calls it): waits for the call in progress (bounded by
//   the store's timeout), drops the calls still queued (their coroutines are destroyed with
//   the io_context, as every pending operation) and joins the thread. Calls after stop() fail
//   with Error(kAborted).
#pragma once

#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "common/bounded_queue.h"
#include "node/api/http_types.h"
#include "node/api/response_store.h"

namespace tpnode::node::api {

class ResponseStoreWorker {
 public:
  ResponseStoreWorker(std::unique_ptr<ResponseStore> store, size_t max_queued,
                      std::chrono::milliseconds max_wait);
  ~ResponseStoreWorker();
  ResponseStoreWorker(const ResponseStoreWorker&) = delete;
  ResponseStoreWorker& operator=(const ResponseStoreWorker&) = delete;

  net::awaitable<void> put(StoredResponse response);
  net::awaitable<std::optional<StoredResponse>> get(std::string id);
  net::awaitable<bool> remove(std::string id);
  std::string describe() const { return store_->describe(); }
  bool offloads() const { return offload_; }  // calls run on the worker's thread
  size_t queued() const;                      // calls waiting (not the one in progress)

  void stop();

 private:
  using Done = std::function<void(std::exception_ptr)>;  // posts the waiter's completion
  struct Job {
    std::function<void(ResponseStore&)> op;
    Done done;
    std::chrono::steady_clock::time_point queued_at;
  };
  // Runs `op` on the worker's thread (or here, for a store that does not block).
  net::awaitable<void> run(std::function<void(ResponseStore&)> op);
  void enqueue(Job job);
  void loop();

  const std::unique_ptr<ResponseStore> store_;
  const bool offload_;
  const std::chrono::milliseconds max_wait_;
  BoundedQueue<Job> queue_;  // HTTP I/O threads -> the worker's thread
  std::thread thread_;       // last: starts after everything it uses (none without offload_)
};

}  // namespace tpnode::node::api
