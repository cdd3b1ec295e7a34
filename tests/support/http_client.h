// Test helper: a minimal blocking HTTP/1.1 client for loopback tests (one request per
// connection, "Connection: close"). Returns status -1 when the server cannot be reached.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace tpnode::test {

struct HttpResponse {
  int status = -1;
  std::string body;
};

inline HttpResponse httpRequest(const std::string& host, uint16_t port, const std::string& method,
                                const std::string& path, const std::string& body = {},
                                double timeout_s = 30) {
  HttpResponse out;
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return out;
  timeval tv{static_cast<time_t>(timeout_s), 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return out;
  }
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: " + host +
                    "\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: " +
                    std::to_string(body.size()) + "\r\n\r\n" + body;
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    ::close(fd);
    return out;
  }
  std::string raw;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;)
    raw.append(buf, static_cast<size_t>(n));
  ::close(fd);
  if (raw.rfind("HTTP/1.1 ", 0) != 0 || raw.size() < 12) return out;
  out.status = std::stoi(raw.substr(9, 3));
  size_t split = raw.find("\r\n\r\n");
  out.body = split == std::string::npos ? "" : raw.substr(split + 4);
  return out;
}

}  // namespace tpnode::test
