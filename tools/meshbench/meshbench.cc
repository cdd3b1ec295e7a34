// meshbench: round-trip latency and bandwidth of the mesh against a minimal blocking TCP
// ping-pong, on loopback, between two processes (this one and a forked child).
//
//   meshbench [--iters N] [--bw-mib 64] [--sockets-per-peer 1] [--spin-us 50]
//
// Prints one line per measurement: "<kind> <size_bytes> p50_us=<> p99_us=<>" for round trips
// and "<kind>_bw <size_bytes> gbit_s=<>" for bandwidth; kinds are "tcp" and "mesh".
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/log.h"
#include "mesh/crypto.h"
#include "mesh/mesh.h"
#include "mesh/tags.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kLatencySizes[] = {64, 4096, 16384, 65536};
constexpr size_t kBandwidthSizes[] = {1 << 20, 4 << 20, 16 << 20, 64 << 20};

struct Args {
  int iters = 2000;
  int sockets_per_peer = 1;
  int spin_us = 0;
  size_t bw_total = size_t{1} << 30;  // bytes moved per bandwidth point
};

uint16_t freePort(const char* host) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, host, &a.sin_addr);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

void percentiles(const char* kind, size_t size, std::vector<double>& us) {
  std::sort(us.begin(), us.end());
  std::printf("%s %zu p50_us=%.1f p99_us=%.1f\n", kind, size, us[us.size() / 2],
              us[us.size() * 99 / 100]);
  std::fflush(stdout);
}

void bandwidth(const char* kind, size_t size, size_t bytes, Clock::duration d) {
  double s = std::chrono::duration<double>(d).count();
  std::printf("%s_bw %zu gbit_s=%.2f\n", kind, size, static_cast<double>(bytes) * 8 / s / 1e9);
  std::fflush(stdout);
}

// ---- Raw TCP: the baseline. Blocking sockets, TCP_NODELAY, exact-size reads. -----------------

void fullWrite(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w <= 0) std::exit(3);
    p += w;
    n -= static_cast<size_t>(w);
  }
}
void fullRead(int fd, char* p, size_t n) {
  while (n > 0) {
    ssize_t r = ::read(fd, p, n);
    if (r <= 0) std::exit(3);
    p += r;
    n -= static_cast<size_t>(r);
  }
}

void runTcp(const Args& a) {
  uint16_t port = freePort("127.0.0.1");
  int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(lfd, 1) != 0) {
    std::perror("bind");
    std::exit(2);
  }
  std::vector<char> buf(64 << 20);
  pid_t child = ::fork();
  if (child == 0) {  // echo server: ping-pong, then sink for bandwidth
    int fd = ::accept(lfd, nullptr, nullptr);
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    for (size_t size : kLatencySizes) {
      for (int i = 0; i < a.iters; ++i) {
        fullRead(fd, buf.data(), size);
        fullWrite(fd, buf.data(), size);
      }
    }
    for (size_t size : kBandwidthSizes) {
      for (size_t moved = 0; moved < a.bw_total; moved += size) fullRead(fd, buf.data(), size);
      fullWrite(fd, buf.data(), 1);
    }
    std::_Exit(0);
  }
  ::close(lfd);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) std::exit(2);
  for (size_t size : kLatencySizes) {
    std::vector<double> us;
    for (int i = 0; i < a.iters; ++i) {
      auto t0 = Clock::now();
      fullWrite(fd, buf.data(), size);
      fullRead(fd, buf.data(), size);
      us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    percentiles("tcp", size, us);
  }
  for (size_t size : kBandwidthSizes) {
    auto t0 = Clock::now();
    for (size_t moved = 0; moved < a.bw_total; moved += size) fullWrite(fd, buf.data(), size);
    fullRead(fd, buf.data(), 1);
    bandwidth("tcp", size, a.bw_total, Clock::now() - t0);
  }
  ::close(fd);
  ::waitpid(child, nullptr, 0);
}

// ---- The mesh: the same exchanges through send/recv. ------------------------------------------

void meshSide(const Args& a, int id, const std::string& peers, const std::string& secret) {
  tpnode::mesh::MeshOptions o;
  o.node_id = id;
  o.peers = tpnode::mesh::parsePeerList(peers);
  o.connect_timeout = std::chrono::seconds(20);
  o.sockets_per_peer = a.sockets_per_peer;
  o.spin = std::chrono::microseconds(a.spin_us);
  o.cluster_secret = secret;  // fresh per run, shared through fork()
  o.fingerprint = tpnode::mesh::computeFingerprint({"peers=" + peers});
  o.fingerprint_text = tpnode::mesh::fingerprintText({"peers=" + peers});
  auto mesh = tpnode::mesh::Mesh::connect(o);
  const int peer = 1 - id;
  const uint32_t tag = tpnode::mesh::kMeshbenchTags.first;  // one tag per socket (<= 16)
  std::vector<std::byte> buf(64 << 20);
  for (size_t size : kLatencySizes) {
    std::span<std::byte> msg(buf.data(), size);
    std::vector<double> us;
    for (int i = 0; i < a.iters; ++i) {
      if (id == 0) {
        auto t0 = Clock::now();
        mesh->send(peer, tag, msg);
        mesh->recv(peer, tag, msg);
        us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      } else {
        mesh->recv(peer, tag, msg);
        mesh->send(peer, tag, msg);
      }
    }
    if (id == 0) percentiles("mesh", size, us);
  }
  for (size_t size : kBandwidthSizes) {
    // Spread consecutive messages over the tags of every socket, as collectives do.
    const size_t count = a.bw_total / size;
    auto t0 = Clock::now();
    for (size_t i = 0; i < count; ++i) {
      uint32_t t = tag + static_cast<uint32_t>(i % static_cast<size_t>(a.sockets_per_peer));
      std::span<std::byte> msg(buf.data(), size);
      if (id == 0) {
        mesh->send(peer, t, msg);
      } else {
        mesh->recv(peer, t, msg);
      }
    }
    std::span<std::byte> ack(buf.data(), 1);
    if (id == 0) {
      mesh->recv(peer, tag, ack);
      bandwidth("mesh", size, count * size, Clock::now() - t0);
    } else {
      mesh->send(peer, tag, ack);
    }
  }
  mesh->shutdown();
}

void runMesh(const Args& a) {
  std::string peers = "127.0.0.1:" + std::to_string(freePort("127.0.0.1")) +
                      ",127.0.0.2:" + std::to_string(freePort("127.0.0.2"));
  std::string secret(32, '\0');
  tpnode::mesh::randomBytes(std::span(reinterpret_cast<uint8_t*>(secret.data()), secret.size()));
  pid_t child = ::fork();
  if (child == 0) {
    try {
      meshSide(a, 1, peers, secret);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "meshbench node 1: %s\n", e.what());
      std::_Exit(1);
    }
    std::_Exit(0);
  }
  meshSide(a, 0, peers, secret);
  int status = 0;
  ::waitpid(child, &status, 0);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    long v = std::atol(argv[i + 1]);
    if (k == "--iters")
      a.iters = static_cast<int>(v);
    else if (k == "--bw-mib")
      a.bw_total = static_cast<size_t>(v) << 20;
    else if (k == "--sockets-per-peer")
      a.sockets_per_peer = static_cast<int>(v);
    else if (k == "--spin-us")
      a.spin_us = static_cast<int>(v);
    else {
      std::fprintf(stderr,
                   "usage: meshbench [--iters N] [--bw-mib M] [--sockets-per-peer S] "
                   "[--spin-us U]\n");
      return 2;
    }
  }
  try {
    tpnode::initLogging("warn", "bench");
    runTcp(a);
    runMesh(a);
  } catch (const tpnode::Error& e) {
    std::fprintf(stderr, "meshbench: %s\n", e.what());
    return 1;
  }
  return 0;
}
