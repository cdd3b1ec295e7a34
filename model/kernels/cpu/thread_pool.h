// ThreadPool: a small persistent pool for one rank's compute. `threads` counts the caller:
// a pool of 1 runs everything on the caller and starts no thread.
//
// Contract
// - run() is called by one thread at a time (the owning rank's thread); it returns when every
//   task has finished. Tasks must not throw (kernels don't); a throwing task is a bug (TP_CHECK
//   aborts via std::terminate in a worker).
// - Workers spin briefly after a run (decode issues many small runs back to back), then sleep
//   on a futex (std::atomic::wait); no thread is created per call.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace tpnode::model::kernels {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over [0, n) in chunks of at least `grain`, on all threads.
  template <typename F>
  void parallelFor(int64_t n, int64_t grain, F&& fn) {
    if (n <= 0) return;
    int64_t chunks = std::min<int64_t>(n / std::max<int64_t>(grain, 1), int64_t{size()} * 4);
    if (chunks <= 1 || size() == 1) {
      fn(int64_t{0}, n);
      return;
    }
    auto body = [&](int64_t c) { fn(c * n / chunks, (c + 1) * n / chunks); };
    run(chunks, Task{&body, [](void* b, int64_t c) { (*static_cast<decltype(body)*>(b))(c); }});
  }

 private:
  struct Task {
    void* ctx;
    void (*call)(void*, int64_t);
  };
  void run(int64_t n_tasks, Task task);
  void workerLoop();
  void drain();

  std::vector<std::thread> workers_;
  Task task_{};
  int64_t n_tasks_ = 0;
  std::atomic<int64_t> next_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> busy_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace tpnode::model::kernels
