// ThreadPool: a small persistent pool for one rank's compute. `threads` counts the caller:
// a pool of 1 runs everything on the caller and starts no thread.
//
// Contract
// - run() is called by one thread at a time (the owning rank's thread); it returns when every
//   task has finished, without waiting for workers that took no task (a worker the OS has not
//   scheduled yet does not hold up a run: the caller and the running workers take its share). Tasks
//   must not throw (kernels don't); a throwing task is a bug (TP_CHECK aborts via std::terminate in
//   a worker).
// - Each thread of a run owns a contiguous share of the tasks and runs it in order (a matmul's
//   thread then streams one contiguous slice of the weights, as a rank of its own would); a thread
//   done with its share takes the last tasks of another's, one at a time, so the threads finish
//   together.
// - Workers spin briefly after a run (decode issues many small runs back to back), then sleep
//   on a futex (std::atomic::wait); no thread is created per call.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
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
    int64_t chunks =
        std::min<int64_t>(n / std::max<int64_t>(grain, 1), int64_t{size()} * kChunksPerThread);
    if (chunks <= 1 || size() == 1) {
      fn(int64_t{0}, n);
      return;
    }
    auto body = [&](int64_t c) { fn(c * n / chunks, (c + 1) * n / chunks); };
    run(chunks, Task{&body, [](void* b, int64_t c) { (*static_cast<decltype(body)*>(b))(c); }});
  }

 private:
  static constexpr int kChunksPerThread = 16;
  struct Task {
    void* ctx;
    void (*call)(void*, int64_t);
  };
  // One thread's share of a run: run number (32 bits) | next task (16) | end (16). The owner
  // takes tasks from the front, others from the back; a thread runs task i only after its CAS
  // moved front or back past i in a word of the current run.
  struct alignas(64) Share {
    std::atomic<uint64_t> word{0};
  };
  void run(int64_t n_tasks, Task task);
  void workerLoop();
  // Runs share `self`'s tasks (when self >= 0), then takes others' last tasks until none is left.
  void work(uint32_t run_no, int self);
  bool takeFront(Share& s, uint32_t run_no, int64_t& task);
  bool takeBack(Share& s, uint32_t run_no, int64_t& task);
  void finish(int64_t task);

  // Joining a run: run number (32 bits) | next share index (32). The caller owns share 0.
  std::atomic<uint64_t> join_{0};
  std::unique_ptr<Share[]> shares_;
  std::atomic<int64_t> done_{0};  // tasks of the current run finished
  int64_t n_tasks_ = 0;           // of the current run
  Task task_{};                   // written by run() while no task is claimable
  std::vector<std::thread> workers_;
  std::atomic<uint64_t> generation_{0};  // bumped per run: wakes sleeping workers
  std::atomic<bool> stop_{false};
};

}  // namespace tpnode::model::kernels
