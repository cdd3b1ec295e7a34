// Test helper: free TCP ports on loopback (bind to port 0, read it back, close). A port can be
// taken by someone else before the test binds it; the tests use fresh ports for every run.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tpnode::mesh::test {

inline uint16_t freePort(const char* host = "127.0.0.1") {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, host, &a.sin_addr);
  a.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// "127.0.0.1:p0,127.0.0.2:p1,..." with one loopback address per node.
inline std::string loopbackPeers(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    std::string host = "127.0.0." + std::to_string(i + 1);
    if (!out.empty()) out += ",";
    out += host + ":" + std::to_string(freePort(host.c_str()));
  }
  return out;
}

}  // namespace tpnode::mesh::test
