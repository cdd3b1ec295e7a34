// Test helper: free TCP ports on loopback for tests that must name their ports before they bind
// them (peer lists of multi-process clusters).
//
// A port is drawn at random from below the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range) and checked by binding it once. Ports handed out by
// bind(0) come from that range, and so does the source port of every outgoing connection: a
// concurrently running test's connect() could take such a port between the check and the moment
// the test's rank binds it. Below the range only another explicit bind can take it, and the draw
// spreads over thousands of ports.
//
// A port handed out is also held until this process exits by an abstract unix socket named for
// it ("tpnode-test-port-N": no file, gone with the process; close-on-exec, so the tpnode
// processes a test starts do not keep it), which this helper and tests/support/free_ports.py
// take before handing a port out. So neither this process (a cluster's API port and its node 0's
// mesh port are drawn one after the other and both bind on 127.0.0.1) nor a test run beside it
// by ctest is handed the same port again between the check and their nodes' bind.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace tpnode::mesh::test {

// The lowest port the kernel hands out as an ephemeral port (32768 where it cannot be read).
inline int ephemeralPortLow() {
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  if (range >> low && low > 2048) return low;
  return 32768;
}

inline bool portBindable(const char* host, uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, host, &a.sin_addr);
  a.sin_port = htons(port);
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

// True when this process now holds the reservation of `port` (an abstract unix socket, left open
// until the process exits); false when a process (this one included) holds it already. Without
// a unix socket to make (out of descriptors), true: the bind check alone.
inline bool reservePort(uint16_t port) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return true;
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const std::string name = "tpnode-test-port-" + std::to_string(port);
  std::memcpy(a.sun_path + 1, name.data(), name.size());  // sun_path[0] == 0: abstract
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0) {
    ::close(fd);
    return false;
  }
  return true;  // fd stays open: the reservation lasts as long as the process
}

inline uint16_t freePort(const char* host = "127.0.0.1") {
  static thread_local std::mt19937 rng{std::random_device{}()};
  int high = ephemeralPortLow() - 1;
  int low = high > 12000 ? 10000 : 1024;
  std::uniform_int_distribution<int> pick(low, high);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    auto port = static_cast<uint16_t>(pick(rng));
    if (portBindable(host, port) && reservePort(port)) return port;
  }
  // Everything below the range is taken: fall back to ports the kernel picks (0 if none).
  for (int attempt = 0; attempt < 100; ++attempt) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ::inet_pton(AF_INET, host, &a.sin_addr);
    socklen_t len = sizeof a;
    const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                       ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
    ::close(fd);
    if (bound && reservePort(ntohs(a.sin_port))) return ntohs(a.sin_port);
  }
  return 0;
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
