// Test helper: a TCP server on loopback that answers every connection with scripted bytes (a
// malformed or oversized Redis reply), or never answers, to check that the client refuses
// them with bounded memory and time.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

namespace tpnode::node::redis::test {

class HostileServer {
 public:
  // `reply`: sent once a command arrives; then `filler` bytes of 'x' (0: none), in 64 KiB
  // writes, while the client stays. An empty reply with no filler: never answers.
  HostileServer(std::string reply, size_t filler) : reply_(std::move(reply)), filler_(filler) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd_, 8);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~HostileServer() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  uint16_t port() const { return port_; }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      char buf[4096];
      pollfd q{c, POLLIN, 0};
      while (!stop_ && ::poll(&q, 1, 50) == 0) {
      }
      if (::recv(c, buf, sizeof buf, 0) > 0 && !reply_.empty()) {
        ::send(c, reply_.data(), reply_.size(), MSG_NOSIGNAL);
        std::string chunk(65536, 'x');
        for (size_t sent = 0; sent < filler_ && !stop_;) {
          ssize_t n = ::send(c, chunk.data(), std::min(chunk.size(), filler_ - sent), MSG_NOSIGNAL);
          if (n <= 0) break;
          sent += static_cast<size_t>(n);
        }
      }
      // Hold the connection until the client closes it (or the test ends).
      while (!stop_ && ::poll(&q, 1, 50) == 0) {
      }
      ::close(c);
    }
  }

  std::string reply_;
  size_t filler_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tpnode::node::redis::test
