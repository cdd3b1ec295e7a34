#include "node/api/response_store_worker.h"

// GCC 12's -Wmismatched-new-delete false positive in Asio's coroutine frames (see
// generation_handler.cc).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

#include <fmt/format.h>

#include "common/error.h"

namespace tpnode::node::api {

ResponseStoreWorker::ResponseStoreWorker(std::unique_ptr<ResponseStore> store, size_t max_queued,
                                         std::chrono::milliseconds max_wait)
    : store_(std::move(store)),
      offload_(store_->mayBlock()),
      max_wait_(max_wait),
      queue_(max_queued) {
  if (offload_) thread_ = std::thread([this] { loop(); });
}

ResponseStoreWorker::~ResponseStoreWorker() {
  stop();
}

void ResponseStoreWorker::stop() {
  // Calls still queued are destroyed without running: their waiters go with the io_context.
  queue_.close();
  if (thread_.joinable()) thread_.join();
}

size_t ResponseStoreWorker::queued() const {
  return queue_.size();
}

void ResponseStoreWorker::enqueue(Job job) {
  switch (queue_.tryPush(job)) {
    case BoundedQueue<Job>::Push::kQueued:
      return;
    case BoundedQueue<Job>::Push::kClosed:
      job.done(std::make_exception_ptr(Error(ErrorCode::kAborted, "the server is stopping")));
      return;
    case BoundedQueue<Job>::Push::kFull:
      job.done(std::make_exception_ptr(Error(
          ErrorCode::kResource,
          fmt::format("{} calls to the store are already waiting (it answers slowly or not at all)",
                      queue_.capacity()))));
      return;
  }
}

void ResponseStoreWorker::loop() {
  while (std::optional<Job> job = queue_.pop()) {
    std::exception_ptr error;
    const auto waited = std::chrono::steady_clock::now() - job->queued_at;
    if (waited > max_wait_) {
      error = std::make_exception_ptr(Error(
          ErrorCode::kTimeout,
          fmt::format("the call waited {} ms behind slower calls to the store (at most {} ms)",
                      std::chrono::duration_cast<std::chrono::milliseconds>(waited).count(),
                      max_wait_.count())));
    } else {
      try {
        job->op(*store_);
      } catch (...) {
        error = std::current_exception();
      }
    }
    job->done(error);
  }
}

net::awaitable<void> ResponseStoreWorker::run(std::function<void(ResponseStore&)> op) {
  if (!offload_) {
    op(*store_);
    co_return;
  }
  co_await net::async_initiate<const net::use_awaitable_t<>&, void(std::exception_ptr)>(
      [this, &op](auto handler) {
        // The waiter resumes on its own executor (its strand), whichever thread completes it.
        auto shared = std::make_shared<decltype(handler)>(std::move(handler));
        Done done = [shared](std::exception_ptr e) {
          auto executor = net::get_associated_executor(*shared);
          net::post(executor, [shared, e]() mutable { std::move (*shared)(e); });
        };
        enqueue(Job{std::move(op), std::move(done), std::chrono::steady_clock::now()});
      },
      net::use_awaitable);
}

net::awaitable<void> ResponseStoreWorker::put(StoredResponse response) {
  co_await run([&response](ResponseStore& s) { s.put(response); });
}

net::awaitable<std::optional<StoredResponse>> ResponseStoreWorker::get(std::string id) {
  std::optional<StoredResponse> out;
  co_await run([&out, &id](ResponseStore& s) { out = s.get(id); });
  co_return out;
}

net::awaitable<bool> ResponseStoreWorker::remove(std::string id) {
  bool existed = false;
  co_await run([&existed, &id](ResponseStore& s) { existed = s.remove(id); });
  co_return existed;
}

}  // namespace tpnode::node::api
