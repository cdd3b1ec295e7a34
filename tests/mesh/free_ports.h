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
// A port handed out is also held until this process exits, so that nothing else that uses this
// helper (or tests/support/free_ports.py) gets it meanwhile: remembered in the process (a
// cluster's API port and its node 0's mesh port are drawn one after the other and both bind on
// 127.0.0.1) and reserved across processes by an abstract unix socket named for the port
// ("tpnode-test-port-N": no file, gone with the process; close-on-exec, so the tpnode processes a
// test starts do not keep it). Two tests run side by side by ctest can therefore never be handed
// the same port between the check and their nodes' bind.
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
#include <mutex>
#include <random>
#include <set>
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
// until the process exits); false when another process (or this one) holds it. Without a unix
// socket to make (out of descriptors), true: the bind check alone.
inline bool reservePortAcrossProcesses(uint16_t port) {
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

// True the first time `port` is claimed in this process and no other process holds it.
inline bool claimPortOnce(uint16_t port) {
  static std::mutex mu;
  static std::set<uint16_t> handed_out;  // guarded by mu
  std::lock_guard<std::mutex> lock(mu);
  return handed_out.insert(port).second && reservePortAcrossProcesses(port);
}

inline uint16_t freePort(const char* host = "127.0.0.1") {
  static thread_local std::mt19937 rng{std::random_device{}()};
  int high = ephemeralPortLow() - 1;
  int low = high > 12000 ? 10000 : 1024;
  std::uniform_int_distribution<int> pick(low, high);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    auto port = static_cast<uint16_t>(pick(rng));
    if (portBindable(host, port) && claimPortOnce(port)) return port;
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
    if (bound && claimPortOnce(ntohs(a.sin_port))) return ntohs(a.sin_port);
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
