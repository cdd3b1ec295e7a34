#include "collectives/send_worker.h"

#include <chrono>

namespace tpnode::collectives {

SendWorker::SendWorker(mesh::Mesh& mesh) : mesh_(mesh), thread_([this] { loop(); }) {}

SendWorker::~SendWorker() {
  drainQuietly();
  stop_.store(true);
  posted_.fetch_add(1);  // wakes the worker; it sees stop_ and leaves
  posted_.notify_all();
  thread_.join();
}

uint64_t SendWorker::post(int peer, uint32_t tag, std::span<const std::byte> data) {
  const uint64_t ticket = posted_.load(std::memory_order_relaxed) + 1;
  if (ticket > kQueue) waitDone(ticket - kQueue);  // its slot is free again
  items_[ticket % kQueue] = Item{peer, tag, data};
  posted_.store(ticket, std::memory_order_release);
  posted_.notify_one();
  return ticket;
}

void SendWorker::waitDone(uint64_t ticket) {
  // Spin first (a chunk takes tens of microseconds), then sleep on the counter.
  for (int i = 0; i < 2000; ++i) {
    if (done_.load(std::memory_order_acquire) >= ticket) return;
    if (i > 100) std::this_thread::yield();
  }
  for (uint64_t d = done_.load(std::memory_order_acquire); d < ticket;
       d = done_.load(std::memory_order_acquire)) {
    done_.wait(d, std::memory_order_acquire);
  }
}

void SendWorker::waitFor(uint64_t ticket) {
  waitDone(ticket);
  if (failed_.load(std::memory_order_acquire)) {
    MutexLock lock(mutex_);
    std::rethrow_exception(error_);
  }
}

void SendWorker::drainQuietly() noexcept {
  waitDone(posted_.load(std::memory_order_relaxed));
}

void SendWorker::loop() {
  uint64_t next = 1;
  for (;;) {
    uint64_t posted = posted_.load(std::memory_order_acquire);
    for (int i = 0; posted < next && i < 200; ++i) {
      posted = posted_.load(std::memory_order_acquire);
    }
    while (posted < next) {
      posted_.wait(posted, std::memory_order_acquire);
      posted = posted_.load(std::memory_order_acquire);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    for (; next <= posted; ++next) {
      const Item item = items_[next % kQueue];
      if (!failed_.load(std::memory_order_relaxed)) {
        try {
          mesh_.send(item.peer, item.tag, item.data);
        } catch (...) {
          MutexLock lock(mutex_);
          error_ = std::current_exception();
          failed_.store(true, std::memory_order_release);
        }
      }
      done_.store(next, std::memory_order_release);
      done_.notify_all();
    }
  }
}

}  // namespace tpnode::collectives
