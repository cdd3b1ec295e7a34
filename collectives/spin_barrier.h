// SpinBarrier: a reusable barrier for the N threads of one local group.
//
// Contract
// - Exactly `parties` threads call arriveAndWait() per phase; the barrier is reusable at once.
//   Everything a thread wrote before arriving is visible to every thread after it leaves
//   (acquire/release on the generation counter).
// - Waiting spins on an atomic for up to `spin` (pause, then yield), then sleeps on the
//   atomic (futex) — small messages never pay a sleep/wake-up when all ranks are running.
// - abort() may be called from any thread (e.g. the mesh liveness thread). It is sticky: every
//   waiter now and every later arriveAndWait() throws Error(code, reason) of the first abort.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "common/error.h"
#include "common/mutex.h"

namespace tpnode::collectives {

class SpinBarrier {
 public:
  SpinBarrier(int parties, std::chrono::microseconds spin);
  SpinBarrier(const SpinBarrier&) = delete;
  SpinBarrier& operator=(const SpinBarrier&) = delete;

  void arriveAndWait();
  void abort(ErrorCode code, const std::string& reason);
  bool aborted() const { return aborted_.load(std::memory_order_seq_cst); }
  // Throws the stored abort error if aborted.
  void throwIfAborted() const;

 private:
  void waitForChange(uint32_t generation);

  const uint32_t parties_;
  const std::chrono::microseconds spin_;
  alignas(64) std::atomic<uint32_t> arrived_{0};
  alignas(64) std::atomic<uint32_t> generation_{0};
  alignas(64) std::atomic<bool> aborted_{false};
  mutable Mutex mutex_;
  ErrorCode abort_code_ TP_GUARDED_BY(mutex_) = ErrorCode::kAborted;
  std::string abort_reason_ TP_GUARDED_BY(mutex_);
};

}  // namespace tpnode::collectives
