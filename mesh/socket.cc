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

Fd acceptOne(int listen_fd, std::string& from, int* error) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  int fd =
      ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (error != nullptr) *error = fd < 0 ? errno : 0;
  if (fd < 0) return Fd();
  from = sockaddrToString(reinterpret_cast<sockaddr*>(&ss));
  setNoDelay(fd);
  return Fd(fd);
}

}  // namespace tpnode::mesh
