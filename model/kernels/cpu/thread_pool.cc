#include "model/kernels/cpu/thread_pool.h"

#include "common/check.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tpnode::model::kernels {
namespace {

constexpr int kSpins = 20000;
constexpr int64_t kMaxTasks = 0x7fff;  // the claim word's 16-bit count and index

inline void pause() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { workerLoop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::drain() {
  uint64_t c = claim_.load(std::memory_order_acquire);
  for (;;) {
    const uint64_t count = (c >> 16) & 0xffff, index = c & 0xffff;
    if (index >= count) return;
    if (!claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
      continue;  // c reloaded: another thread claimed, or a new run started
    }
    task_.call(task_.ctx, static_cast<int64_t>(index));
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<int64_t>(count)) {
      done_.notify_one();
    }
    c = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::run(int64_t n_tasks, Task task) {
  TP_CHECK(n_tasks > 0 && n_tasks <= kMaxTasks, "{} tasks in one run", n_tasks);
  // No task of the previous run is claimable any more (all were claimed and finished), so
  // nothing reads task_ while it is replaced.
  task_ = task;
  done_.store(0, std::memory_order_relaxed);
  const uint64_t run_no = (claim_.load(std::memory_order_relaxed) >> 32) + 1;
  claim_.store(run_no << 32 | static_cast<uint64_t>(n_tasks) << 16, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  drain();
  for (int spin = 0;; ++spin) {
    const int64_t d = done_.load(std::memory_order_acquire);
    if (d == n_tasks) return;
    if (spin < kSpins) {
      pause();
    } else {
      done_.wait(d, std::memory_order_acquire);
    }
  }
}

void ThreadPool::workerLoop() {
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = generation_.load(std::memory_order_acquire);
    for (int spin = 0; g == seen; ++spin) {
      if (spin < kSpins) {
        pause();
      } else {
        generation_.wait(seen, std::memory_order_acquire);
      }
      g = generation_.load(std::memory_order_acquire);
    }
    seen = g;
    if (stop_.load()) return;
    drain();
  }
}

}  // namespace tpnode::model::kernels
