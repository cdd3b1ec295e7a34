// The byte stream under one link: plain TCP or TLS. Non-blocking; whoever calls it waits with
// poll() on fd() itself.
//
// Contract
// - read/writev never block (readBlocking waits at most ~100 ms). They return the byte count,
// kWouldBlock, or (read) 0 at an
//   orderly end of stream; a broken connection throws Error(kPeerLost), other failures
//   Error(kIo).
// - One reader and one writer may call at the same time (the link's receive role and send
//   lock guarantee at most one of each); TLS serializes the two internally.
// - shutdownBoth() may be called from any thread at any time to wake a poll() on fd().
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <memory>
#include <span>
#include <vector>

#include "mesh/socket.h"

namespace tpnode::mesh {

class Transport {
 public:
  static constexpr ssize_t kWouldBlock = -1;

  virtual ~Transport() = default;
  virtual int fd() const = 0;
  virtual ssize_t read(void* buffer, size_t size) = 0;
  virtual ssize_t writev(const iovec* iov, int count) = 0;
  // Like read(), but sleeps in the kernel until bytes arrive, the connection is shut down, or
  // a short timeout (100 ms) passes (then kWouldBlock). Only when canBlock().
  virtual bool canBlock() const { return false; }
  virtual ssize_t readBlocking(void* buffer, size_t size) { return read(buffer, size); }
  // True when bytes were already received and decoded but not read (TLS records); a reader
  // must not sleep in poll() while this holds.
  virtual bool hasBuffered() const { return false; }
  // Half-closes the sending side after the last frame (GOODBYE).
  virtual void shutdownWrite() = 0;
  virtual void shutdownBoth() = 0;
  virtual const char* name() const = 0;
  // TLS: the peer presented a certificate verified against the cluster CA.
  virtual bool hasPeerCertificate() const { return false; }
  // The node ids that certificate names (CN and DNS SANs "tpnode-node-<id>"); empty without.
  virtual std::vector<int> peerCertNodes() const { return {}; }
};

// Plain TCP: each call is one system call. The socket is switched to blocking mode with a
// 100 ms receive timeout; read/writev pass MSG_DONTWAIT.
std::unique_ptr<Transport> makePlainTransport(Fd fd);

}  // namespace tpnode::mesh

namespace tpnode::mesh {

// Blocking helpers with a deadline for connection setup (the handshake), over any Transport.
// Throw Error(kTimeout) at the deadline, Error(kPeerLost) when the stream ends.
void readFull(Transport& transport, std::span<uint8_t> out, Clock::time_point deadline);
void writeAll(Transport& transport, std::span<const uint8_t> data, Clock::time_point deadline);

}  // namespace tpnode::mesh
