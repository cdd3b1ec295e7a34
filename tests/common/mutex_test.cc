// common/mutex.h: the lock, relock and adopt paths, and CondVar's wake-ups and timeouts.
#include "common/mutex.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace tpnode {
namespace {

struct Counter {
  Mutex mu;
  CondVar cv;
  int value TP_GUARDED_BY(mu) = 0;
};

TEST(MutexTest, MutexLockUnlocksAndRelocks) {
  Counter c;
  {
    MutexLock lock(c.mu);
    c.value = 1;
    lock.unlock();
    if (c.mu.tryLock()) {  // really released
      c.mu.unlock();
    } else {
      ADD_FAILURE() << "unlock() left the mutex held";
    }
    lock.lock();
    c.value = 2;
  }
  if (!c.mu.tryLock()) FAIL() << "the destructor left the mutex held";
  MutexLock adopted(c.mu, std::adopt_lock);
  EXPECT_EQ(c.value, 2);
}

TEST(MutexTest, CondVarWakesAWaiter) {
  Counter c;
  std::thread setter([&] {
    MutexLock lock(c.mu);
    c.value = 7;
    c.cv.notifyAll();
  });
  {
    MutexLock lock(c.mu);
    c.cv.wait(c.mu, [&]() TP_NO_THREAD_SAFETY_ANALYSIS { return c.value == 7; });
    EXPECT_EQ(c.value, 7);
  }
  setter.join();
}

TEST(MutexTest, CondVarWaitUntilTimesOut) {
  Counter c;
  MutexLock lock(c.mu);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(c.cv.waitUntil(c.mu, start + std::chrono::milliseconds(20)));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(20));
  c.value = 1;  // still held after the timeout
}

}  // namespace
}  // namespace tpnode
