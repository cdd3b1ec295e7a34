#include "model/kernels/cpu/thread_pool.h"

#include "common/check.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tpnode::model::kernels {
namespace {

constexpr int kSpins = 20000;
constexpr int64_t kMaxTasks = 0xffff;  // a share's 16-bit front and end

inline void pause() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

constexpr uint64_t shareWord(uint32_t run_no, uint64_t front, uint64_t end) {
  return static_cast<uint64_t>(run_no) << 32 | front << 16 | end;
}

}  // namespace

ThreadPool::ThreadPool(int threads)
    : shares_(std::make_unique<Share[]>(static_cast<size_t>(std::max(threads, 1)))) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { workerLoop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (std::thread& t : workers_) t.join();
}

bool ThreadPool::takeFront(Share& s, uint32_t run_no, int64_t& task) {
  uint64_t w = s.word.load(std::memory_order_acquire);
  for (;;) {
    const uint64_t front = (w >> 16) & 0xffff, end = w & 0xffff;
    if (static_cast<uint32_t>(w >> 32) != run_no || front >= end) return false;
    if (s.word.compare_exchange_weak(w, shareWord(run_no, front + 1, end),
                                     std::memory_order_acq_rel, std::memory_order_acquire)) {
      task = static_cast<int64_t>(front);
      return true;
    }
  }
}

bool ThreadPool::takeBack(Share& s, uint32_t run_no, int64_t& task) {
  uint64_t w = s.word.load(std::memory_order_acquire);
  for (;;) {
    const uint64_t front = (w >> 16) & 0xffff, end = w & 0xffff;
    if (static_cast<uint32_t>(w >> 32) != run_no || front >= end) return false;
    if (s.word.compare_exchange_weak(w, shareWord(run_no, front, end - 1),
                                     std::memory_order_acq_rel, std::memory_order_acquire)) {
      task = static_cast<int64_t>(end - 1);
      return true;
    }
  }
}

void ThreadPool::finish(int64_t task) {
  const int64_t n_tasks = n_tasks_;  // read before done_ may complete the run
  task_.call(task_.ctx, task);
  if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_tasks) done_.notify_one();
}

// task_ and n_tasks_ are read only after a successful take in a word of run `run_no`: run() wrote
// them before publishing that run's words, and does not return (so does not start another run)
// before every task taken has finished.
void ThreadPool::work(uint32_t run_no, int self) {
  const int n = size();
  int64_t task = 0;
  if (self >= 0) {
    while (takeFront(shares_[static_cast<size_t>(self)], run_no, task)) finish(task);
  }
  for (int k = 1; k <= n; ++k) {
    Share& victim = shares_[static_cast<size_t>((std::max(self, 0) + k) % n)];
    while (takeBack(victim, run_no, task)) finish(task);
  }
}

void ThreadPool::run(int64_t n_tasks, Task task) {
  TP_CHECK(n_tasks > 0 && n_tasks <= kMaxTasks, "{} tasks in one run", n_tasks);
  // No task of the previous run is takeable any more (all were taken and finished), so nothing
  // reads task_ or n_tasks_ while they are replaced.
  task_ = task;
  n_tasks_ = n_tasks;
  done_.store(0, std::memory_order_relaxed);
  const auto run_no = static_cast<uint32_t>((join_.load(std::memory_order_relaxed) >> 32) + 1);
  const int n = size();
  for (int i = 0; i < n; ++i) {
    shares_[static_cast<size_t>(i)].word.store(
        shareWord(run_no, static_cast<uint64_t>(i * n_tasks / n),
                  static_cast<uint64_t>((i + 1) * n_tasks / n)),
        std::memory_order_release);
  }
  join_.store(static_cast<uint64_t>(run_no) << 32 | 1, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  work(run_no, 0);
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
    // Join the newest run: a share of our own if one is left, else only help with others'.
    uint64_t j = join_.load(std::memory_order_acquire);
    int self = -1;
    while ((j & 0xffffffff) < static_cast<uint64_t>(size())) {
      if (join_.compare_exchange_weak(j, j + 1, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
        self = static_cast<int>(j & 0xffffffff);
        break;
      }
    }
    work(static_cast<uint32_t>(j >> 32), self);
  }
}

}  // namespace tpnode::model::kernels
