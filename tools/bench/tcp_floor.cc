// Reference point for tools/bench-allreduce.sh: the message pattern of tpnode's small-message
// all-reduce over raw loopback TCP sockets, with nothing else: no framing, no tags, no locks,
// no liveness. 2 processes: the direct exchange (each sends its S bytes to the other, receives
// S bytes, sums). 3+ processes: the tree (every process sends S bytes to process 0, which
// sums and sends the S-byte sum back). Receives spin on non-blocking recv() and yield the core
// between tries, as the mesh does. What tpnode adds on top of this is its own overhead; what
// this costs is the floor of the pattern on this machine.
// Not part of the tpnode build: the script compiles it alone (plain C++17, POSIX sockets).
//   tcp_floor NPROCS SIZES(bytes,comma) ITERS [BIND]  -> JSON on stdout (process 0, as tpbench
//   --json)
// Talks only to 127.0.0.1, on ports it binds itself; forks NPROCS-1 children. With BIND=1 and
// no more processes than CPUs, process i is pinned to CPU i (as mpirun binds).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>  // sched_yield, sched_setaffinity
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "allreduce_report.h"

namespace {

[[noreturn]] void die(const char* what) {
  std::perror(what);
  std::exit(1);
}

void sendAll(int fd, const char* p, size_t n) {
  for (size_t done = 0; done < n;) {
    const ssize_t r = ::send(fd, p + done, n - done, MSG_NOSIGNAL);
    if (r < 0) die("send");
    done += static_cast<size_t>(r);
  }
}

void recvAll(int fd, char* p, size_t n) {
  for (size_t done = 0; done < n;) {
    const ssize_t r = ::recv(fd, p + done, n - done, MSG_DONTWAIT);
    if (r > 0) {
      done += static_cast<size_t>(r);
    } else if (r == 0) {
      std::fprintf(stderr, "tcp_floor: peer closed\n");
      std::exit(1);
    } else {
      sched_yield();
    }
  }
}

void sum(float* acc, const float* x, size_t count) {
  for (size_t i = 0; i < count; ++i) acc[i] += x[i];
}

bool g_bind = false;  // the BIND argument

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr, "usage: tcp_floor NPROCS SIZES(bytes,comma) ITERS [BIND]\n");
    return 2;
  }
  g_bind = argc == 5 && std::string(argv[4]) == "1";
  const int n = std::atoi(argv[1]);
  std::vector<size_t> sizes;
  std::stringstream ss(argv[2]);
  for (std::string item; std::getline(ss, item, ',');) sizes.push_back(std::stoull(item));
  const int iters = std::atoi(argv[3]);
  if (n < 2 || n > 64 || iters < 1 || sizes.empty()) {
    std::fprintf(stderr, "tcp_floor: need 2..64 processes, >= 1 iteration, some sizes\n");
    return 2;
  }
  for (size_t bytes : sizes) {
    // Crossing blocking sends of 2 processes must fit the socket buffers.
    if (bytes > 256 * 1024 || bytes % sizeof(float) != 0) {
      std::fprintf(stderr, "tcp_floor: sizes are multiples of 4 up to 256 KiB, not %zu\n", bytes);
      return 2;
    }
  }

  // Process 0 listens on an ephemeral loopback port; the others connect to it.
  const int one = 1;
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener, 64) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    die("listen on 127.0.0.1");
  }
  int me = 0;
  for (int i = 1; i < n && me == 0; ++i) {
    const pid_t pid = ::fork();
    if (pid < 0) die("fork");
    if (pid == 0) me = i;
  }
  std::vector<int> fds(static_cast<size_t>(n), -1);  // process 0: one per peer; others: [0]
  if (me == 0) {
    for (int i = 1; i < n; ++i) {
      const int fd = ::accept(listener, nullptr, nullptr);
      if (fd < 0) die("accept");
      int peer = 0;
      recvAll(fd, reinterpret_cast<char*>(&peer), sizeof peer);
      fds[static_cast<size_t>(peer)] = fd;
    }
  } else {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      die("connect to 127.0.0.1");
    }
    sendAll(fd, reinterpret_cast<const char*>(&me), sizeof me);
    fds[0] = fd;
  }
  ::close(listener);
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  if (g_bind && n <= cpus) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(me, &set);
    if (::sched_setaffinity(0, sizeof set, &set) != 0) die("sched_setaffinity");
  }
  for (int fd : fds) {
    if (fd >= 0) ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }

  std::string json = "[";
  for (size_t bytes : sizes) {
    const size_t count = bytes / sizeof(float);
    std::vector<float> data(count, 0.0f);
    std::vector<float> in(count * static_cast<size_t>(n), 0.0f);  // touched once, reused
    auto* raw = reinterpret_cast<char*>(data.data());
    auto slot = [&](int j) { return in.data() + static_cast<size_t>(j) * count; };
    std::vector<double> us;
    for (int it = -(iters / 10 + 2); it < iters; ++it) {
      const auto t0 = std::chrono::steady_clock::now();
      if (n == 2) {  // direct exchange
        sendAll(me == 0 ? fds[1] : fds[0], raw, bytes);
        recvAll(me == 0 ? fds[1] : fds[0], reinterpret_cast<char*>(slot(0)), bytes);
        sum(data.data(), slot(0), count);
      } else if (me != 0) {  // tree: leaf
        sendAll(fds[0], raw, bytes);
        recvAll(fds[0], raw, bytes);
      } else {  // tree: root
        for (int j = 1; j < n; ++j) recvAll(fds[j], reinterpret_cast<char*>(slot(j)), bytes);
        for (int j = 1; j < n; ++j) sum(data.data(), slot(j), count);
        for (int j = 1; j < n; ++j) sendAll(fds[j], raw, bytes);
      }
      const std::chrono::duration<double, std::micro> d = std::chrono::steady_clock::now() - t0;
      if (it >= 0) us.push_back(d.count());
    }
    appendAllReduceResult(json, bytes, us, n);
  }
  for (int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
  if (me != 0) return 0;
  while (::wait(nullptr) > 0) {
  }
  std::printf("%s]\n", json.c_str());
  return 0;
}
