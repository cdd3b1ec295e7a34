#include "collectives/spin_barrier.h"

#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TP_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define TP_CPU_RELAX() asm volatile("yield" ::: "memory")
#else
#define TP_CPU_RELAX() ((void)0)
#endif

namespace tpnode::collectives {

SpinBarrier::SpinBarrier(int parties, std::chrono::microseconds spin)
    : parties_(static_cast<uint32_t>(parties)), spin_(spin) {}

void SpinBarrier::arriveAndWait() {
  throwIfAborted();
  const uint32_t generation = generation_.load(std::memory_order_acquire);
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == parties_) {
    arrived_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    return;
  }
  waitForChange(generation);
  throwIfAborted();
}

void SpinBarrier::waitForChange(uint32_t generation) {
  // Phase 1: a short pure spin (the other ranks are usually microseconds away).
  for (int i = 0; i < 256; ++i) {
    if (generation_.load(std::memory_order_acquire) != generation) return;
    TP_CPU_RELAX();
  }
  // Phase 2: spin with yield, so an oversubscribed machine still runs the late rank.
  const auto deadline = std::chrono::steady_clock::now() + spin_;
  while (std::chrono::steady_clock::now() < deadline) {
    for (int i = 0; i < 16; ++i) {
      if (generation_.load(std::memory_order_acquire) != generation) return;
      TP_CPU_RELAX();
    }
    std::this_thread::yield();
  }
  // Phase 3: sleep on the futex until the generation moves (completion or abort).
  while (generation_.load(std::memory_order_acquire) == generation) {
    generation_.wait(generation, std::memory_order_acquire);
  }
}

void SpinBarrier::abort(ErrorCode code, const std::string& reason) {
  {
    MutexLock lock(mutex_);
    if (aborted_.load(std::memory_order_relaxed)) return;
    abort_code_ = code;
    abort_reason_ = reason;
    aborted_.store(true, std::memory_order_seq_cst);
  }
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
}

void SpinBarrier::throwIfAborted() const {
  if (!aborted_.load(std::memory_order_acquire)) return;
  MutexLock lock(mutex_);
  throw Error(abort_code_, abort_reason_);
}

}  // namespace tpnode::collectives
