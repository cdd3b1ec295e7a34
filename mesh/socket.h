// POSIX TCP socket helpers for the mesh: an RAII descriptor and the blocking-with-deadline
// primitives used during connection setup.
//
// Contract
// - Fd owns one descriptor and closes it on destruction; move-only.
// - Sockets made here are non-blocking, close-on-exec and (for TCP streams) TCP_NODELAY.
// - The *Until() helpers wait with poll() and give up at `deadline` with Error(kTimeout); an
//   orderly or abrupt close by the peer is Error(kPeerLost); other OS errors Error(kIo).
// - Any thread; a given Fd is used by one thread at a time unless the caller says otherwise.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "mesh/mesh.h"

namespace tpnode::mesh {

using Clock = std::chrono::steady_clock;

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void reset();

 private:
  int fd_ = -1;
};

// Binds and listens on `address` (which must name an address of this host).
Fd listenOn(const PeerAddress& address);

// One non-blocking connect attempt bounded by `timeout`. Returns an invalid Fd and sets `why`
// ("connection refused", "timed out", ...) when it fails; throws only for an unresolvable host.
Fd connectOnce(const PeerAddress& address, std::chrono::milliseconds timeout, std::string& why);

// Accepts one pending connection (invalid Fd when none is pending). `from` gets "ip:port".
Fd acceptOne(int listen_fd, std::string& from);

void setNoDelay(int fd);
void setBuffers(int fd, int bytes);

void readUntil(int fd, std::span<uint8_t> out, Clock::time_point deadline);
void writeUntil(int fd, std::span<const uint8_t> data, Clock::time_point deadline);

// Waits until `fd` is readable (or has an error/hang-up) or `deadline`; true when readable.
bool waitReadable(int fd, Clock::time_point deadline);

}  // namespace tpnode::mesh
