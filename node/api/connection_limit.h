// ConnectionLimit: caps the API's open HTTP connections (--max-connections).
//
// Contract
// - admit() runs on the accept loop; it returns a Slot for the new connection, or null when
//   every slot is busy with a request (the caller answers 503 and closes), or when connections
//   it evicted are still closing (`*retry` is set then: the caller waits a moment and asks
//   again, so a burst of new connections cannot push descriptors past the bound). At the cap it
//   makes room by evicting the connection that has been idle longest (no request being
//   handled: it waits for its TLS handshake, for its next request or for the rest of one; a new
//   connection is idle from the start): its socket is shut down (shutdown(2) on its
//   descriptor), so its pending read ends and its coroutine closes it.
// - A Slot belongs to one connection coroutine (its strand): setIdle() marks it evictable or
//   not; the Slot must be destroyed before the connection's socket is closed, so that an
//   eviction never touches a descriptor number that was reused.
// - Open descriptors stay below 2 x max: evicted connections still count until they close.
// - Thread-safe (one mutex; a few operations per connection and request).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

namespace tpnode::node::api {

class ConnectionLimit {
 public:
  class Slot {
   public:
    ~Slot();
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    void setIdle(bool idle);

   private:
    friend class ConnectionLimit;
    Slot(ConnectionLimit& limit, uint64_t id) : limit_(limit), id_(id) {}
    ConnectionLimit& limit_;  // the server's; outlives every connection
    const uint64_t id_;
  };

  explicit ConnectionLimit(size_t max_connections) : max_(max_connections) {}

  std::unique_ptr<Slot> admit(int fd, bool* retry);
  size_t max() const { return max_; }
  size_t open() const;
  uint64_t evicted() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    int fd = -1;
    bool idle = false;
    bool evicted = false;
    Clock::time_point idle_since{};
  };

  const size_t max_;
  mutable std::mutex mu_;
  std::map<uint64_t, Entry> entries_;  // guarded by mu_
  size_t live_ = 0;                    // guarded by mu_: entries not evicted
  uint64_t next_id_ = 1;               // guarded by mu_
  uint64_t evicted_ = 0;               // guarded by mu_
};

}  // namespace tpnode::node::api
