// RequestQueue (node/request_queue.h): callers post, the loop thread takes.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "node/request_queue.h"

namespace tpnode::node {
namespace {

using namespace std::chrono_literals;

TEST(RequestQueueTest, IdsIncreaseAndTakeHandsOverRequestsAndCancelsOnce) {
  RequestQueue q;
  q.setOpen(true);
  int events = 0;
  auto on_event = [&](const TokenEvent&) { ++events; };
  EXPECT_EQ(q.push({}, on_event, false), 1u);
  EXPECT_EQ(q.push({}, on_event, true), 2u);
  q.cancel(1);
  std::deque<IncomingRequest> got;
  std::vector<uint64_t> cancels;
  q.take(/*busy=*/true, 0ms, got, cancels);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].id, 1u);
  EXPECT_TRUE(got[1].all_logits);
  EXPECT_EQ(cancels, std::vector<uint64_t>{1});
  got.clear();
  cancels.clear();
  q.take(true, 0ms, got, cancels);
  EXPECT_TRUE(got.empty());
  EXPECT_TRUE(cancels.empty());
}

TEST(RequestQueueTest, ReadsComeOutOldestFirstAndDrainTakesWhatIsLeft) {
  RequestQueue q;
  q.setOpen(true);
  q.pushRead({3, [](TensorReadResult) {}});
  q.pushRead({4, [](TensorReadResult) {}});
  q.push(
      {}, [](const TokenEvent&) {}, false);
  auto first = q.takeRead();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->index, 3u);
  std::deque<IncomingRequest> requests;
  std::deque<PendingRead> reads;
  q.drain(requests, reads);
  EXPECT_EQ(requests.size(), 1u);
  ASSERT_EQ(reads.size(), 1u);
  EXPECT_EQ(reads[0].index, 4u);
  EXPECT_FALSE(q.takeRead().has_value());
}

// Closed (before the cluster forms, and from a fault on): nothing is kept, so nothing posted after
// the loop drained waits for a cluster that is not there; the caller refuses it.
TEST(RequestQueueTest, AClosedQueueRefusesWhatIsPosted) {
  RequestQueue q;
  int events = 0;
  auto on_event = [&](const TokenEvent&) { ++events; };
  EXPECT_EQ(q.push({}, on_event, false), 0u);
  EXPECT_FALSE(q.pushRead({1, [](TensorReadResult) {}}));
  q.setOpen(true);
  EXPECT_EQ(q.push({}, on_event, false), 1u);
  EXPECT_TRUE(q.pushRead({2, [](TensorReadResult) {}}));
  q.setOpen(false);  // a fault: closed, then drained
  std::deque<IncomingRequest> requests;
  std::deque<PendingRead> reads;
  q.drain(requests, reads);
  EXPECT_EQ(requests.size(), 1u);
  EXPECT_EQ(reads.size(), 1u);
  EXPECT_EQ(q.push({}, on_event, false), 0u);
  EXPECT_FALSE(q.pushRead({3, [](TensorReadResult) {}}));
  requests.clear();
  reads.clear();
  q.drain(requests, reads);
  EXPECT_TRUE(requests.empty());
  EXPECT_TRUE(reads.empty());
  EXPECT_EQ(events, 0);
  q.setOpen(true);  // re-formed: ids go on increasing
  EXPECT_EQ(q.push({}, on_event, false), 2u);
}

TEST(RequestQueueTest, KeptResultsAreFetchedOnce) {
  RequestQueue q;
  RequestTiming t;
  t.decode_steps = 7;
  q.keep(5, t, std::vector<float>{1.f, 2.f});
  q.keep(6, t, std::nullopt);
  EXPECT_EQ(q.timing(5).decode_steps, 7);
  EXPECT_EQ(q.takeLogits(5), (std::vector<float>{1.f, 2.f}));
  EXPECT_TRUE(q.takeLogits(5).empty());
  EXPECT_TRUE(q.takeLogits(6).empty());
}

TEST(RequestQueueTest, StopEndsWaitsAtOnceAndForGood) {
  RequestQueue q;
  std::thread stopper([&] {
    std::this_thread::sleep_for(50ms);
    q.stop();
  });
  const auto t0 = std::chrono::steady_clock::now();
  q.waitStopped(t0 + 30s);
  stopper.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  std::deque<IncomingRequest> got;
  std::vector<uint64_t> cancels;
  const auto t1 = std::chrono::steady_clock::now();
  q.take(/*busy=*/false, 30s, got, cancels);  // no wait once stopped
  EXPECT_LT(std::chrono::steady_clock::now() - t1, 10s);
}

}  // namespace
}  // namespace tpnode::node
