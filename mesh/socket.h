// POSIX TCP socket helpers for the mesh: an RAII descriptor, listen, one bounded connect
// attempt, accept.
//
// Contract
// - Fd owns one descriptor and closes it on destruction; move-only.
// - Sockets made here are non-blocking, close-on-exec and (for TCP streams) TCP_NODELAY.
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

// Accepts one pending connection (invalid Fd when none is pending or accept failed; then
// `*error`, if given, gets errno, e.g. EMFILE). `from` gets "ip:port". Never throws.
Fd acceptOne(int listen_fd, std::string& from, int* error = nullptr);

void setNoDelay(int fd);
void setBuffers(int fd, int bytes);

}  // namespace tpnode::mesh
