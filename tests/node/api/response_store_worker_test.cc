// ResponseStoreWorker (node/api/response_store_worker.h) with a store that blocks until the test
// lets it go: calls run off the awaiting thread, at most `max_queued` wait (the next is refused
// at once with kResource), a call that waited past `max_wait` fails with kTimeout without
// reaching the store, stop() drops what is queued, and a store that never blocks runs in place.
#include "node/api/response_store_worker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "common/error.h"
#include "node/api/memory_response_store.h"

namespace tpnode::node::api {
namespace {

using namespace std::chrono_literals;

// get() blocks until release(); counts the calls that reached it.
class GateStore final : public ResponseStore {
 public:
  void put(const StoredResponse&) override { pass(); }
  std::optional<StoredResponse> get(const std::string& id) override {
    pass();
    return StoredResponse{id, {}, {}};
  }
  bool remove(const std::string&) override {
    pass();
    return true;
  }
  std::string describe() const override { return "gate"; }
  bool mayBlock() const override { return true; }

  void release() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  int calls() const { return calls_.load(); }
  std::thread::id lastThread() {
    std::lock_guard lock(mu_);
    return thread_;
  }

 private:
  void pass() {
    ++calls_;
    std::unique_lock lock(mu_);
    thread_ = std::this_thread::get_id();
    cv_.wait(lock, [&] { return open_; });
  }
  std::atomic<int> calls_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  std::thread::id thread_;
};

// One get() per call, its outcome as an error code (kInternal: succeeded).
struct Calls {
  std::mutex mu;
  std::vector<ErrorCode> outcomes;
  void add(ErrorCode c) {
    std::lock_guard lock(mu);
    outcomes.push_back(c);
  }
  size_t count(ErrorCode c) {
    std::lock_guard lock(mu);
    return static_cast<size_t>(std::count(outcomes.begin(), outcomes.end(), c));
  }
  size_t size() {
    std::lock_guard lock(mu);
    return outcomes.size();
  }
};

net::awaitable<void> getOne(ResponseStoreWorker& w, Calls& calls) {
  ErrorCode outcome = ErrorCode::kInternal;
  try {
    std::optional<StoredResponse> r = co_await w.get("resp_1");
    EXPECT_TRUE(r.has_value());
  } catch (const Error& e) {
    outcome = e.code();
  }
  calls.add(outcome);
}

template <typename Pred>
bool waitFor(Pred pred) {
  for (int i = 0; i < 1000 && !pred(); ++i) std::this_thread::sleep_for(5ms);
  return pred();
}

// A worker over a GateStore with one I/O thread; the destructor opens the gate and stops both
// (in ApiServer::stop's order), also when an assertion ended the test early.
struct Rig {
  Rig(size_t max_queued, std::chrono::milliseconds max_wait) {
    auto owned = std::make_unique<GateStore>();
    store = owned.get();
    worker = std::make_unique<ResponseStoreWorker>(std::move(owned), max_queued, max_wait);
    io_thread = std::thread([this] { io.run(); });
  }
  ~Rig() {
    store->release();
    guard.reset();
    io.stop();
    io_thread.join();
    worker->stop();
  }
  void spawnGet(Calls& calls) { net::co_spawn(io, getOne(*worker, calls), net::detached); }

  GateStore* store = nullptr;  // owned by the worker
  std::unique_ptr<ResponseStoreWorker> worker;
  net::io_context io;
  net::executor_work_guard<net::io_context::executor_type> guard = net::make_work_guard(io);
  std::thread io_thread;
};

TEST(ResponseStoreWorkerTest, RunsOffTheIoThreadAndBoundsItsQueue) {
  Calls calls;
  Rig rig(/*max_queued=*/2, /*max_wait=*/60s);
  ASSERT_TRUE(rig.worker->offloads());
  // One call at the store, two queued, the fourth and fifth refused at once.
  rig.spawnGet(calls);
  ASSERT_TRUE(waitFor([&] { return rig.store->calls() == 1; }));
  for (int i = 0; i < 4; ++i) rig.spawnGet(calls);
  ASSERT_TRUE(waitFor([&] { return calls.size() == 2; }));
  EXPECT_EQ(calls.count(ErrorCode::kResource), 2u);
  EXPECT_EQ(rig.worker->queued(), 2u);
  EXPECT_NE(rig.store->lastThread(), rig.io_thread.get_id());  // the I/O thread stayed free
  rig.store->release();
  ASSERT_TRUE(waitFor([&] { return calls.size() == 5; }));
  EXPECT_EQ(calls.count(ErrorCode::kInternal), 3u);
  EXPECT_EQ(rig.store->calls(), 3);
}

TEST(ResponseStoreWorkerTest, ACallQueuedPastMaxWaitTimesOutWithoutReachingTheStore) {
  Calls calls;
  Rig rig(8, /*max_wait=*/300ms);
  rig.spawnGet(calls);
  ASSERT_TRUE(waitFor([&] { return rig.store->calls() == 1; }));
  rig.spawnGet(calls);
  ASSERT_TRUE(waitFor([&] { return rig.worker->queued() == 1; }));
  std::this_thread::sleep_for(600ms);  // past max_wait while the first call holds the store
  rig.store->release();
  ASSERT_TRUE(waitFor([&] { return calls.size() == 2; }));
  EXPECT_EQ(calls.count(ErrorCode::kInternal), 1u);
  EXPECT_EQ(calls.count(ErrorCode::kTimeout), 1u);
  EXPECT_EQ(rig.store->calls(), 1);
}

TEST(ResponseStoreWorkerTest, StopDropsTheQueueAndLaterCallsAreAborted) {
  auto owned = std::make_unique<GateStore>();
  GateStore& store = *owned;
  auto worker = std::make_unique<ResponseStoreWorker>(std::move(owned), 8, 60s);
  Calls calls;
  {
    net::io_context io;
    auto guard = net::make_work_guard(io);
    std::thread io_thread([&] { io.run(); });
    net::co_spawn(io, getOne(*worker, calls), net::detached);
    ASSERT_TRUE(waitFor([&] { return store.calls() == 1; }));
    net::co_spawn(io, getOne(*worker, calls), net::detached);
    ASSERT_TRUE(waitFor([&] { return worker->queued() == 1; }));
    io.stop();  // as ApiServer::stop: the I/O threads first
    io_thread.join();
    std::thread releaser([&] {
      std::this_thread::sleep_for(20ms);
      store.release();
    });
    worker->stop();  // waits for the call at the store, drops the queued one
    releaser.join();
    EXPECT_EQ(worker->queued(), 0u);
    EXPECT_EQ(store.calls(), 1);
  }  // the io_context destroys the waiting coroutines
  EXPECT_EQ(calls.size(), 0u);
  net::io_context io2;
  net::co_spawn(io2, getOne(*worker, calls), net::detached);
  io2.run();
  EXPECT_EQ(calls.count(ErrorCode::kAborted), 1u);
}

TEST(ResponseStoreWorkerTest, AStoreThatNeverBlocksRunsInPlace) {
  ResponseStoreWorker worker(std::make_unique<MemoryResponseStore>(1 << 20), 1, 1ms);
  EXPECT_FALSE(worker.offloads());
  net::io_context io;
  bool found = false;
  StoredResponse stored;
  stored.id = "resp_a";
  stored.response = nlohmann::json::object();
  stored.conversation.push_back(ChatMessage{"user", "hi"});
  net::co_spawn(
      io,
      [&]() -> net::awaitable<void> {
        co_await worker.put(stored);
        found = (co_await worker.get("resp_a")).has_value();
        EXPECT_TRUE(co_await worker.remove("resp_a"));
        EXPECT_FALSE((co_await worker.get("resp_a")).has_value());
      },
      net::detached);
  io.run();
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace tpnode::node::api
