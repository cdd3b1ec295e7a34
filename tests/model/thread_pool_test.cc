// ThreadPool: every chunk of every run executes exactly once and the run returns only after
// all of them, with more threads than CPUs (workers often not scheduled when a run starts, so
// late workers meet finished runs and later ones) and with back-to-back runs of varying sizes.
#include <gtest/gtest.h>

#include <time.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "model/kernels/cpu/thread_pool.h"

namespace tpnode::model::kernels {
namespace {

void checkRuns(int threads, int runs) {
  ThreadPool pool(threads);
  std::vector<std::atomic<int>> hits(256);
  for (int r = 0; r < runs; ++r) {
    const int64_t n = 1 + (r * 37) % 200;
    for (auto& h : hits) h.store(0, std::memory_order_relaxed);
    pool.parallelFor(n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    });
    // Every index exactly once, and nothing still running: a late chunk would show here or
    // in the next run's counts.
    for (int64_t i = 0; i < 256; ++i) {
      ASSERT_EQ(hits[static_cast<size_t>(i)].load(), i < n ? 1 : 0)
          << threads << " threads, run " << r << ", n " << n << ", index " << i;
    }
  }
}

TEST(ThreadPoolTest, OneThreadRunsInline) {
  checkRuns(1, 50);
}

TEST(ThreadPoolTest, EveryChunkOnceWithMoreThreadsThanCpus) {
  checkRuns(2, 3000);
  checkRuns(6, 3000);
}

TEST(ThreadPoolTest, PoolsComeAndGo) {
  for (int i = 0; i < 50; ++i) checkRuns(3, 5);
}

// The caller owns the first contiguous share of a run's tasks (16 per thread) and runs it front to
// back; others may take its last tasks, so what it runs of its share is 0, 1, 2, ... in order.
TEST(ThreadPoolTest, CallerRunsItsShareInOrder) {
  ThreadPool pool(2);
  size_t caller_ran = 0;
  for (int r = 0; r < 200; ++r) {
    const std::thread::id caller = std::this_thread::get_id();
    std::vector<int64_t> mine;  // tasks run by the caller, in order (only it appends)
    pool.parallelFor(32, 1, [&](int64_t b, int64_t e) {
      ASSERT_EQ(e, b + 1);
      if (std::this_thread::get_id() == caller) mine.push_back(b);
    });
    // A caller the OS preempted right after publishing the run may find its share taken by the
    // worker: it then runs none of it. What it does run of its share starts at 0, in order.
    caller_ran += mine.size();
    for (size_t i = 0; i < mine.size() && mine[i] < 16; ++i) {
      ASSERT_EQ(mine[i], static_cast<int64_t>(i)) << "run " << r;
    }
  }
  EXPECT_GT(caller_ran, 0u) << "the caller never ran a task of its own runs";
}

double processCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// After a run, workers spin only briefly, then sleep: an idle server (a rank waiting for the next
// request) uses no CPU. Spinning workers would burn ~3 CPU-seconds in this second of idling.
TEST(ThreadPoolTest, IdleWorkersSleep) {
  ThreadPool pool(4);
  std::atomic<int64_t> sum{0};
  pool.parallelFor(1000, 1, [&](int64_t b, int64_t e) { sum.fetch_add(e - b); });
  ASSERT_EQ(sum.load(), 1000);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // past the spin window
  const double before = processCpuSeconds();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_LT(processCpuSeconds() - before, 0.1) << "pool workers kept running while idle";
}

}  // namespace
}  // namespace tpnode::model::kernels
