#include "common/bounded_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace tpnode {
namespace {

// Items come out in order; a full queue refuses without taking the item; after close() pushes
// are refused, pop() returns nothing and the items still queued are handed back.
TEST(BoundedQueueTest, RefusesWhenFullOrClosedAndHandsBackWhatWasLeft) {
  BoundedQueue<std::string> q(2);
  std::string a = "a", b = "b", c = "c";
  EXPECT_EQ(q.tryPush(a), BoundedQueue<std::string>::Push::kQueued);
  EXPECT_EQ(q.tryPush(b), BoundedQueue<std::string>::Push::kQueued);
  EXPECT_TRUE(q.full());
  EXPECT_EQ(q.tryPush(c), BoundedQueue<std::string>::Push::kFull);
  EXPECT_EQ(c, "c");  // not taken
  EXPECT_EQ(q.pop(), "a");
  EXPECT_EQ(q.tryPush(c), BoundedQueue<std::string>::Push::kQueued);
  std::deque<std::string> left = q.close();
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(left[0], "b");
  EXPECT_EQ(left[1], "c");
  std::string d = "d";
  EXPECT_EQ(q.tryPush(d), BoundedQueue<std::string>::Push::kClosed);
  EXPECT_EQ(d, "d");
  EXPECT_FALSE(q.pop().has_value());
  EXPECT_EQ(q.size(), 0u);
}

// A consumer waiting in pop() gets what another thread pushes, in order, and wakes with nothing
// at close().
TEST(BoundedQueueTest, PopWaitsForAPushAndWakesAtClose) {
  BoundedQueue<int> q(4);
  std::vector<int> got;  // the consumer's; read after join()
  std::atomic<int> taken{0};
  std::thread consumer([&] {
    while (std::optional<int> v = q.pop()) {
      got.push_back(*v);
      taken.fetch_add(1);
    }
  });
  for (int i = 0; i < 3; ++i) {
    int v = i;
    while (q.tryPush(v) == BoundedQueue<int>::Push::kFull) std::this_thread::yield();
  }
  while (taken.load() < 3) std::this_thread::yield();
  q.close();  // the consumer waits in pop(): close() must wake it
  consumer.join();
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2}));
}

}  // namespace
}  // namespace tpnode
