// SendWorker: one thread that performs the mesh sends queued by a lane's ring all-reduce, so
// that sending (the copy into the kernel) overlaps receiving and reducing on the lane's thread.
// The mesh's send runs on its caller's thread; without this the ring's thread alternates
// between the two copies.
//
// Contract
// - post()/waitFor()/drain() are called by ONE thread (the lane's); the worker thread only
//   sends. Sends go out in post order. A posted buffer must stay alive and untouched until
//   waitFor(its ticket) or drain() returned.
// - The first send error is stored; waitFor()/drain() rethrow it; later queued sends are
//   skipped. drainQuietly() waits without throwing (for unwinding after another error).
// - The Mesh must outlive the worker; the destructor finishes queued sends and joins.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <exception>
#include <span>
#include <thread>

#include "common/mutex.h"
#include "mesh/mesh.h"

namespace tpnode::collectives {

class SendWorker {
 public:
  explicit SendWorker(mesh::Mesh& mesh);
  ~SendWorker();
  SendWorker(const SendWorker&) = delete;
  SendWorker& operator=(const SendWorker&) = delete;

  // Queues a send and returns its ticket (1, 2, ...). Blocks while kQueue sends are pending.
  uint64_t post(int peer, uint32_t tag, std::span<const std::byte> data);
  // Returns once every send up to `ticket` is done; rethrows the first send error.
  void waitFor(uint64_t ticket);
  void drain() { waitFor(posted_.load(std::memory_order_relaxed)); }
  void drainQuietly() noexcept;

 private:
  static constexpr size_t kQueue = 64;
  struct Item {
    int peer = 0;
    uint32_t tag = 0;
    std::span<const std::byte> data;
  };
  void loop();
  void waitDone(uint64_t ticket);

  mesh::Mesh& mesh_;                // outlives the worker (see contract)
  std::array<Item, kQueue> items_;  // slot t % kQueue: written by post() before posted_ = t
  alignas(64) std::atomic<uint64_t> posted_{0};
  alignas(64) std::atomic<uint64_t> done_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  Mutex mutex_;
  std::exception_ptr error_ TP_GUARDED_BY(mutex_);
  std::thread thread_;
};

}  // namespace tpnode::collectives
