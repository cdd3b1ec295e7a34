// A std::mutex that Clang's thread-safety analysis understands (common/thread_annotations.h),
// its RAII lock, and a condition variable that waits on it.
//
// Contract
// - Mutex: not recursive; lock()/unlock() as std::mutex. Annotate the data it protects with
//   TP_GUARDED_BY(mu_) and functions that need it with TP_REQUIRES(mu_).
// - MutexLock: holds the mutex from construction to destruction; unlock()/lock() in between
//   release and retake it (the analysis tracks both). With std::adopt_lock it takes over a
//   mutex already held (after a successful tryLock()).
// - CondVar: std::condition_variable on the Mutex underneath, same wake-up rules (spurious
//   wake-ups happen: wait in a loop or with a predicate). The caller holds the mutex.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "common/thread_annotations.h"

namespace tpnode {

class TP_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() TP_ACQUIRE() { mu_.lock(); }
  void unlock() TP_RELEASE() { mu_.unlock(); }
  bool tryLock() TP_TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // For the analysis only: states that the calling thread holds the mutex.
  void assertHeld() const TP_THREAD_ANNOTATION_(assert_capability(this)) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

class TP_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) TP_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  MutexLock(Mutex& mu, std::adopt_lock_t) TP_REQUIRES(mu) : mu_(mu) {}
  ~MutexLock() TP_RELEASE() {
    if (held_) mu_.unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void unlock() TP_RELEASE() {
    mu_.unlock();
    held_ = false;
  }
  void lock() TP_ACQUIRE() {
    mu_.lock();
    held_ = true;
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

class CondVar {
 public:
  void wait(Mutex& mu) TP_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  template <typename Predicate>
  void wait(Mutex& mu, Predicate ready) TP_REQUIRES(mu) {
    while (!ready()) wait(mu);
  }
  // False on timeout.
  template <typename ClockT, typename Duration>
  bool waitUntil(Mutex& mu, std::chrono::time_point<ClockT, Duration> deadline) TP_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    const bool woken = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }
  template <typename Rep, typename Period>
  bool waitFor(Mutex& mu, std::chrono::duration<Rep, Period> timeout) TP_REQUIRES(mu) {
    return waitUntil(mu, std::chrono::steady_clock::now() + timeout);
  }
  void notifyOne() { cv_.notify_one(); }
  void notifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace tpnode
