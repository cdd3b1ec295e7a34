#include "mesh/transport.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>

#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace tpnode::mesh {

namespace {

[[noreturn]] void failErrno(const char* what) {
  int err = errno;
  // A peer process that dies with unread bytes in its socket resets the connection instead of
  // closing it: say so in the words of a close (what the reader of the log needs to know).
  if (err == ECONNRESET || err == EPIPE) {
    fail(ErrorCode::kPeerLost,
         "it closed the connection without GOODBYE (did the process die?); {}: {}", what,
         std::strerror(err));
  }
  bool lost = err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH || err == ENOTCONN;
  fail(lost ? ErrorCode::kPeerLost : ErrorCode::kIo, "{}: {}", what, std::strerror(err));
}

class PlainTransport final : public Transport {
 public:
  explicit PlainTransport(Fd fd) : fd_(std::move(fd)) {
    int flags = ::fcntl(fd_.get(), F_GETFL);
    ::fcntl(fd_.get(), F_SETFL, flags & ~O_NONBLOCK);
    timeval tv{0, 100'000};
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }

  int fd() const override { return fd_.get(); }

  ssize_t read(void* buffer, size_t size) override { return recvWith(buffer, size, MSG_DONTWAIT); }
  bool canBlock() const override { return true; }
  ssize_t readBlocking(void* buffer, size_t size) override { return recvWith(buffer, size, 0); }

  ssize_t recvWith(void* buffer, size_t size, int flags) {
    for (;;) {
      ssize_t n = ::recv(fd_.get(), buffer, size, flags);
      if (n >= 0) return n;
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return kWouldBlock;
      failErrno("recv");
    }
  }

  ssize_t writev(const iovec* iov, int count) override {
    msghdr msg{};
    msg.msg_iov = const_cast<iovec*>(iov);
    msg.msg_iovlen = static_cast<size_t>(count);
    for (;;) {
      ssize_t n = ::sendmsg(fd_.get(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n >= 0) return n;
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return kWouldBlock;
      failErrno("sendmsg");
    }
  }

  void shutdownWrite() override { ::shutdown(fd_.get(), SHUT_WR); }
  void shutdownBoth() override { ::shutdown(fd_.get(), SHUT_RDWR); }
  const char* name() const override { return "tcp"; }

 private:
  Fd fd_;
};

}  // namespace

std::unique_ptr<Transport> makePlainTransport(Fd fd) {
  return std::make_unique<PlainTransport>(std::move(fd));
}

}  // namespace tpnode::mesh

namespace tpnode::mesh {

namespace {

void waitFor(Transport& t, short events, Clock::time_point deadline, const char* what) {
  auto now = Clock::now();
  if (now >= deadline) fail(ErrorCode::kTimeout, "the peer {} in time", what);
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
  pollfd p{t.fd(), events, 0};
  ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left + 1, 200)));
}

}  // namespace

void readFull(Transport& t, std::span<uint8_t> out, Clock::time_point deadline) {
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = t.read(out.data() + got, out.size() - got);
    if (n == 0) fail(ErrorCode::kPeerLost, "the peer closed the connection");
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (!t.hasBuffered()) {
      waitFor(t, POLLIN, deadline, "sent nothing");
    }
  }
}

void writeAll(Transport& t, std::span<const uint8_t> data, Clock::time_point deadline) {
  size_t sent = 0;
  while (sent < data.size()) {
    iovec iov{const_cast<uint8_t*>(data.data() + sent), data.size() - sent};
    ssize_t n = t.writev(&iov, 1);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else {
      waitFor(t, POLLOUT, deadline, "read nothing");
    }
  }
}

}  // namespace tpnode::mesh
