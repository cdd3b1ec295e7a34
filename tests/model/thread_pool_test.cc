// ThreadPool: every chunk of every run executes exactly once and the run returns only after
// all of them, with more threads than CPUs (workers often not scheduled when a run starts, so
// late workers meet finished runs and later ones) and with back-to-back runs of varying sizes.
#include <gtest/gtest.h>

#include <atomic>
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

}  // namespace
}  // namespace tpnode::model::kernels
