#include "mesh/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "common/error.h"

namespace tpnode::mesh {

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.release();
  }
  return *this;
}

int Fd::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

namespace {

struct AddrInfoDeleter {
  void operator()(addrinfo* ai) const { freeaddrinfo(ai); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

AddrInfoPtr resolve(const PeerAddress& address, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* result = nullptr;
  std::string port = std::to_string(address.port);
  int rc = getaddrinfo(address.host.c_str(), port.c_str(), &hints, &result);
  if (rc != 0) {
    fail(ErrorCode::kInvalidArgument, "cannot resolve host '{}' of {}: {}", address.host,
         address.toString(), gai_strerror(rc));
  }
  return AddrInfoPtr(result);
}

Fd makeSocket(const addrinfo* ai) {
  int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
  if (fd < 0) fail(ErrorCode::kIo, "socket(): {}", std::strerror(errno));
  return Fd(fd);
}

std::string sockaddrToString(const sockaddr* sa) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (sa->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
  } else if (sa->sa_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    port = ntohs(in6->sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

int pollMs(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(left.count() + 1, 1000)));
}

}  // namespace

void setNoDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void setBuffers(int fd, int bytes) {
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

Fd listenOn(const PeerAddress& address) {
  AddrInfoPtr ai = resolve(address, true);
  Fd fd = makeSocket(ai.get());
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
    int err = errno;
    fail(ErrorCode::kIo, "cannot listen on {}: {}{}", address.toString(), std::strerror(err),
         err == EADDRINUSE      ? " (is another tpnode with this --node-id running?)"
         : err == EADDRNOTAVAIL ? " (is --node-id right? this host does not have that address)"
                                : "");
  }
  if (::listen(fd.get(), 128) != 0) {
    fail(ErrorCode::kIo, "listen({}): {}", address.toString(), std::strerror(errno));
  }
  return fd;
}

Fd connectOnce(const PeerAddress& address, std::chrono::milliseconds timeout, std::string& why) {
  AddrInfoPtr ai = resolve(address, false);
  Fd fd = makeSocket(ai.get());
  if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
    why = std::strerror(errno);
    return Fd();
  }
  pollfd p{fd.get(), POLLOUT, 0};
  int rc = ::poll(&p, 1, static_cast<int>(timeout.count()));
  if (rc == 0) {
    why = "connect timed out";
    return Fd();
  }
  int err = 0;
  socklen_t len = sizeof err;
  ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
  if (rc < 0 || err != 0) {
    why = std::strerror(rc < 0 ? errno : err);
    return Fd();
  }
  setNoDelay(fd.get());
  return fd;
}

Fd acceptOne(int listen_fd, std::string& from) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  int fd =
      ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return Fd();
  from = sockaddrToString(reinterpret_cast<sockaddr*>(&ss));
  setNoDelay(fd);
  return Fd(fd);
}

bool waitReadable(int fd, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int rc = ::poll(&p, 1, pollMs(deadline));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) fail(ErrorCode::kIo, "poll(): {}", std::strerror(errno));
    if (Clock::now() >= deadline) return false;
  }
}

void readUntil(int fd, std::span<uint8_t> out, Clock::time_point deadline) {
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::recv(fd, out.data() + got, out.size() - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n == 0) {
      fail(ErrorCode::kPeerLost, "the peer closed the connection");
    } else if (errno == EAGAIN || errno == EINTR) {
      if (!waitReadable(fd, deadline)) fail(ErrorCode::kTimeout, "the peer sent nothing in time");
    } else {
      fail(errno == ECONNRESET ? ErrorCode::kPeerLost : ErrorCode::kIo, "recv(): {}",
           std::strerror(errno));
    }
  }
}

void writeUntil(int fd, std::span<const uint8_t> data, Clock::time_point deadline) {
  size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n >= 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (errno != EAGAIN && errno != EINTR) {
      fail(errno == EPIPE || errno == ECONNRESET ? ErrorCode::kPeerLost : ErrorCode::kIo,
           "send(): {}", std::strerror(errno));
    }
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, pollMs(deadline)) == 0 && Clock::now() >= deadline) {
      fail(ErrorCode::kTimeout, "the peer did not read in time");
    }
  }
}

}  // namespace tpnode::mesh
