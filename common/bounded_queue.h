// BoundedQueue<T>: a first-in first-out queue of at most `capacity` items between producers that
// never wait and one consumer thread that does (a store's writer or caller thread behind the
// threads that must not block: node/kv_tier_rank.h, node/api/response_store_worker.h).
//
// Contract
// - tryPush() never waits: it takes the item (moving from it) and returns kQueued, or leaves the
//   item as it was and returns kFull (capacity items wait) or kClosed (after close()), so that
//   the caller can answer or count it.
// - pop() waits for an item and returns the oldest; it returns nullopt once the queue is closed,
//   even with items still queued (close() hands those back).
// - close() is idempotent: it wakes pop() and returns the items that were still queued (the
//   caller drops or fails them outside the lock). Any thread.
#pragma once

#include <algorithm>
#include <cstddef>
#include <deque>
#include <optional>
#include <utility>

#include "common/mutex.h"

namespace tpnode {

template <typename T>
class BoundedQueue {
 public:
  enum class Push { kQueued, kFull, kClosed };

  explicit BoundedQueue(size_t capacity) : capacity_(std::max<size_t>(1, capacity)) {}
  BoundedQueue(const BoundedQueue&) = delete;
  BoundedQueue& operator=(const BoundedQueue&) = delete;

  size_t capacity() const { return capacity_; }

  Push tryPush(T& item) {
    {
      MutexLock lock(mu_);
      if (closed_) return Push::kClosed;
      if (items_.size() >= capacity_) return Push::kFull;
      items_.push_back(std::move(item));
    }
    ready_.notifyOne();
    return Push::kQueued;
  }

  std::optional<T> pop() {
    MutexLock lock(mu_);
    while (!closed_ && items_.empty()) ready_.wait(mu_);
    if (closed_) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    return item;
  }

  std::deque<T> close() {
    std::deque<T> left;
    {
      MutexLock lock(mu_);
      closed_ = true;
      left.swap(items_);
    }
    ready_.notifyAll();
    return left;
  }

  size_t size() const {
    MutexLock lock(mu_);
    return items_.size();
  }
  bool full() const { return size() >= capacity_; }

 private:
  const size_t capacity_;
  mutable Mutex mu_;
  CondVar ready_;
  std::deque<T> items_ TP_GUARDED_BY(mu_);
  bool closed_ TP_GUARDED_BY(mu_) = false;
};

}  // namespace tpnode
