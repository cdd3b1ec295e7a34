// ThreadPool: a small persistent pool for one rank's compute. `threads` counts the caller:
// a pool of 1 runs everything on the caller and starts no thread.
//
// Contract
// - run() is called by one thread at a time (the owning rank's thread); it returns when every
//   task has finished, without waiting for workers that took no task (a worker the OS has not
//   scheduled yet does not hold up a run: the caller and the running workers take its share). Tasks
//   must not throw (kernels don't); a throwing task is a bug (TP_CHECK aborts via std::terminate in
//   a worker).
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
  // Claims and runs tasks of the current run until none is left.
  void drain();

  // Claim word: run number (32 bits) | task count (16) | next task index (16). A thread runs
  // task i only after its CAS moved the index from i < count; run() returns only when `done_`
  // reaches the count, so task_ stays valid for every claimed task, and a thread that finds
  // index >= count touches nothing else. So run() never waits for a worker that has not
  // claimed a task (one the OS has not scheduled yet, on a busy machine), only for tasks.
  std::atomic<uint64_t> claim_{0};
  std::atomic<int64_t> done_{0};  // tasks of the current run finished
  Task task_{};                   // written by run() while no task is claimable
  std::vector<std::thread> workers_;
  std::atomic<uint64_t> generation_{0};  // bumped per run: wakes sleeping workers
  std::atomic<bool> stop_{false};
};

}  // namespace tpnode::model::kernels
