// A tpnode node 0 under attack on loopback: hostile clients written here speak the mesh
// protocol (or just open sockets) against a real tpnode process. Every client is bounded in
// count and time; the attackers connect from their own 127.0.0.x addresses so that the real
// nodes (127.0.0.1, 127.0.0.2) are a different source.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "common/byte_order.h"
#include "free_ports.h"
#include "mesh/crypto.h"
#include "mesh/handshake.h"
#include "process.h"
#include "tests/support/test_env.h"

namespace tpnode::mesh::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A blocking TCP client socket from `source` (a 127.0.0.x address) to host:port; -1 on failure.
int connectFrom(const std::string& source, const std::string& host, uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, source.c_str(), &a.sin_addr);
  sockaddr_in b{};
  b.sin_family = AF_INET;
  b.sin_port = htons(port);
  ::inet_pton(AF_INET, host.c_str(), &b.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&b), sizeof b) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Closes with a reset (no TIME_WAIT left behind on the client side).
void resetClose(int fd) {
  linger l{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  ::close(fd);
}

// Reads exactly out.size() bytes within `timeout`; false on end of stream or timeout.
bool readExactly(int fd, std::span<uint8_t> out, milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  size_t got = 0;
  while (got < out.size()) {
    auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    ssize_t n = ::recv(fd, out.data() + got, out.size() - got, 0);
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

struct RawFrame {
  uint16_t version = 0;
  uint8_t type = 0;
  std::vector<uint8_t> header;
  std::vector<uint8_t> payload;
};

// One frame of whatever protocol version the peer speaks (at most 8 KiB of payload).
std::optional<RawFrame> readFrame(int fd, milliseconds timeout) {
  RawFrame f;
  f.header.resize(kFrameHeaderSize);
  if (!readExactly(fd, f.header, timeout)) return std::nullopt;
  f.version = loadLE16(&f.header[4]);
  f.type = f.header[6];
  uint64_t length = loadLE64(&f.header[24]);
  if (length > 8192) return std::nullopt;
  f.payload.resize(length);
  if (!readExactly(fd, f.payload, timeout)) return std::nullopt;
  return f;
}

// What an impostor without the secret sends after the acceptor's first frame to claim node 1:
// for a protocol-1 node (which sent its HELLO first) its own HELLO back with node id 1; for a
// protocol-2 node (CHALLENGE) a HELLO claiming node 1 with a made-up proof.
std::vector<uint8_t> claimNode1(const RawFrame& first, uint32_t node_count, uint32_t lane = 0) {
  if (first.version == 1 && first.type == 1 && first.payload.size() >= 12) {
    std::vector<uint8_t> out = first.header;
    std::vector<uint8_t> payload = first.payload;
    storeLE32(&payload[0], 1);  // node id
    storeLE32(&payload[8], lane);
    out.insert(out.end(), payload.begin(), payload.end());
    return out;
  }
  Hello h;
  h.node_id = 1;
  h.node_count = node_count;
  h.lane = lane;
  h.lanes = 2;
  h.auth = true;
  randomBytes(h.nonce);
  randomBytes(h.proof);
  return controlFrame(FrameType::kHello, encodeHello(h));
}

bool sendAll(int fd, const std::vector<uint8_t>& bytes) {
  return ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

// A "Name: N kB" field of /proc/<pid>/status: VmRSS (all resident pages) or RssAnon (without
// the program's and libraries' code pages, which the first use of a code path pages in).
long statusKiB(pid_t pid, const std::string& field) {
  std::ifstream in(fmt::format("/proc/{}/status", pid));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  }
  return -1;
}

std::string rss(pid_t pid) {
  return fmt::format("{} (anon {})", statusKiB(pid, "VmRSS"), statusKiB(pid, "RssAnon"));
}

class MeshSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = makeTempDir("tpnode-meshsec-");
    secret_ = randomSecretHex();
    peers_ = loopbackPeers(2);
    port0_ = static_cast<uint16_t>(std::stoi(peers_.substr(peers_.find(':') + 1)));
  }
  void TearDown() override {
    if (HasFailure()) {
      for (auto& [name, p] : procs_) std::cerr << "---- " << name << " ----\n" << p->log();
    }
    procs_.clear();  // kills what still runs
    std::filesystem::remove_all(dir_);
  }

  Process& start(const std::string& name, int id, std::vector<std::string> extra,
                 std::optional<std::string> secret = {}) {
    std::vector<std::string> args = {"--node-id", std::to_string(id), "--peers", peers_};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<std::string> env;
    std::string s = secret.value_or(secret_);
    if (!s.empty()) env.push_back("TPNODE_CLUSTER_SECRET=" + s);
    procs_.emplace_back(name, std::make_unique<Process>(args, env, dir_ + "/" + name + ".log"));
    return *procs_.back().second;
  }

  // Runs `tpnode args...` to completion (bounded) and returns its exit code.
  int run(const std::string& name, std::vector<std::string> args) {
    Process p(std::move(args), {}, dir_ + "/" + name + ".log");
    int code = p.wait(seconds(20));
    last_log_ = p.log();
    return code;
  }

  std::string dir_, secret_, peers_, last_log_;
  uint16_t port0_ = 0;
  std::vector<std::pair<std::string, std::unique_ptr<Process>>> procs_;
};

TEST_F(MeshSecurityTest, ANodeWithoutASecretRefusesToFormAMeshUnlessInsecure) {
  Process& n0 = start("node0", 0, {"--connect-timeout", "20"}, "");
  EXPECT_NE(n0.wait(seconds(10)), 0);
  EXPECT_NE(n0.log().find("tpnode gen-secret"), std::string::npos);
  EXPECT_NE(n0.log().find("--cluster-secret-file"), std::string::npos);
  // An impostor speaking the protocol finds nobody listening.
  EXPECT_EQ(connectFrom("127.0.0.9", "127.0.0.1", port0_), -1);

  Process& loose = start("node0-insecure", 0, {"--connect-timeout", "20", "--insecure"}, "");
  ASSERT_TRUE(loose.waitForLog("--insecure", seconds(10)));
  EXPECT_NE(loose.log().find("any host that can reach port"), std::string::npos);
  loose.signal(SIGTERM);
  loose.wait(seconds(10));
}

TEST_F(MeshSecurityTest, ASecretUnder128BitsIsRefusedNamingItsLength) {
  Process& n0 = start("node0", 0, {"--connect-timeout", "20"}, "pass");  // 4 raw bytes
  EXPECT_NE(n0.wait(seconds(10)), 0);
  EXPECT_NE(n0.log().find("4 bytes (32 bits)"), std::string::npos);
  // 30 hex digits are 15 bytes: still too short.
  std::string file = dir_ + "/short";
  std::ofstream(file) << std::string(30, 'a') << "\n";
  ::chmod(file.c_str(), 0600);
  Process& n0b =
      start("node0-file", 0, {"--connect-timeout", "20", "--cluster-secret-file", file}, "");
  EXPECT_NE(n0b.wait(seconds(10)), 0);
  EXPECT_NE(n0b.log().find("15 bytes (120 bits)"), std::string::npos);
}

TEST_F(MeshSecurityTest, GenSecretWritesA256BitSecretOnceWithMode0600) {
  std::string file = dir_ + "/cluster.secret";
  ASSERT_EQ(run("gen", {"gen-secret", file}), 0) << last_log_;
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(text.size(), 65u);
  EXPECT_EQ(text.find_first_not_of("0123456789abcdef"), 64u);
  EXPECT_NE(run("gen-again", {"gen-secret", file}), 0);  // never overwrites
  std::ifstream again(file);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>()),
            text);
  // The file forms a mesh.
  Process& n0 = start("node0", 0, {"--cluster-secret-file", file, "--connect-timeout", "20"}, "");
  Process& n1 = start("node1", 1, {"--cluster-secret-file", file, "--connect-timeout", "20"}, "");
  EXPECT_EQ(n0.wait(seconds(30)), 0);
  EXPECT_EQ(n1.wait(seconds(30)), 0);
}

TEST_F(MeshSecurityTest, AnUnauthenticatedClientCapturesNothingToGuessTheSecretFrom) {
  Process& n0 = start("node0", 0, {"--connect-timeout", "20"});
  ASSERT_TRUE(n0.waitForLog("waiting for node 1", seconds(10)));
  int fd = connectFrom("127.0.0.9", "127.0.0.1", port0_);
  ASSERT_GE(fd, 0);
  std::vector<RawFrame> got;
  std::vector<uint8_t> raw;
  if (auto first = readFrame(fd, seconds(5))) {
    got.push_back(*first);
    sendAll(fd, claimNode1(*first, 2));
    while (auto f = readFrame(fd, seconds(5))) got.push_back(*f);
  }
  resetClose(fd);
  for (const auto& f : got) {
    raw.insert(raw.end(), f.header.begin(), f.header.end());
    raw.insert(raw.end(), f.payload.begin(), f.payload.end());
  }
  const std::string bytes(raw.begin(), raw.end());
  // Exactly a CHALLENGE (a random nonce) and a REFUSE: no proof, no fingerprint, no detail.
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].type, static_cast<uint8_t>(FrameType::kChallenge));
  EXPECT_EQ(got[0].payload.size(), 32u);
  EXPECT_EQ(got[1].type, static_cast<uint8_t>(FrameType::kRefuse));
  EXPECT_EQ(bytes.find("peers="), std::string::npos);
  EXPECT_EQ(bytes.find("127.0.0."), std::string::npos);
  EXPECT_EQ(bytes.find("node 0"), std::string::npos);
  EXPECT_TRUE(n0.waitForLog("a peer claiming node 1 failed the HMAC challenge", seconds(5)));
}

TEST_F(MeshSecurityTest, HandshakesAreCappedPerSourceAddress) {
  Process& n0 = start("node0", 0, {"--connect-timeout", "30"});
  ASSERT_TRUE(n0.waitForLog("waiting for node 1", seconds(10)));
  // 70 idle sockets from one address: more than the global cap of 64 of the old code.
  std::vector<int> idle;
  for (int i = 0; i < 70; ++i) {
    int fd = connectFrom("127.0.0.9", "127.0.0.1", port0_);
    if (fd >= 0) idle.push_back(fd);
  }
  EXPECT_TRUE(n0.waitForLog("handshakes from 127.0.0.9 are running already", seconds(5)));
  // Another address is still served at once.
  int other = connectFrom("127.0.0.10", "127.0.0.1", port0_);
  ASSERT_GE(other, 0);
  auto first = readFrame(other, seconds(3));
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->type, static_cast<uint8_t>(FrameType::kChallenge));
  resetClose(other);
  for (int fd : idle) resetClose(fd);
  // The real node still joins.
  Process& n1 = start("node1", 1, {"--connect-timeout", "30"});
  EXPECT_EQ(n1.wait(seconds(30)), 0);
  EXPECT_EQ(n0.wait(seconds(30)), 0);
}

// Node 0 may open only 40 descriptors; idle connections from many addresses exhaust them.
// Accepting fails with EMFILE: node 0 says so (at most once per 5 s, with a count) and goes
// on, and the real node 1 joins once the idle connections are gone.
TEST_F(MeshSecurityTest, RunningOutOfDescriptorsRefusesConnectionsAndGoesOn) {
  const auto bin = testing_support::testEnv("TPNODE_BIN");
  ASSERT_TRUE(bin.has_value());
  std::vector<std::string> args = {"--nofile=40", "--",          *bin,   "--node-id",
                                   "0",           "--peers",     peers_, "--connect-timeout",
                                   "60",          "--mesh-hold", "1"};
  procs_.emplace_back(
      "node0",
      std::make_unique<Process>(args, std::vector<std::string>{"TPNODE_CLUSTER_SECRET=" + secret_},
                                dir_ + "/node0.log", "/usr/bin/prlimit"));
  Process& n0 = *procs_.back().second;
  ASSERT_TRUE(n0.waitForLog("waiting for node 1", seconds(10)));
  std::vector<int> idle;
  for (int i = 0; i < 80; ++i) {  // 8 per address: under the per-source cap
    int fd = connectFrom(fmt::format("127.0.0.{}", 50 + i / 8), "127.0.0.1", port0_);
    if (fd >= 0) idle.push_back(fd);
  }
  EXPECT_TRUE(n0.waitForLog("cannot accept a mesh connection: Too many open files", seconds(5)));
  std::this_thread::sleep_for(seconds(2));
  for (int fd : idle) resetClose(fd);
  Process& n1 = start("node1", 1, {"--connect-timeout", "60", "--mesh-hold", "1"});
  EXPECT_EQ(n0.wait(seconds(40)), 0);
  EXPECT_EQ(n1.wait(seconds(40)), 0);
  // Logged once per 5 s, not once per failed accept.
  const std::string log = n0.log();
  size_t lines = 0;
  for (size_t at = log.find("cannot accept"); at != std::string::npos;
       at = log.find("cannot accept", at + 1)) {
    ++lines;
  }
  EXPECT_GE(lines, 1u);
  EXPECT_LE(lines, 4u) << log;
}

// Node 0 waits for node 1 while impostors keep claiming node 1, idle sockets fill handshake
// slots and a flood opens and resets connections. Phase 1: the flood alone, then node 0's RSS
// once the flood's handshakes have timed out, compared with before. Phase 2: the flood again,
// and the real node 1 arrives in the middle of it: it must join at once.
TEST_F(MeshSecurityTest, FloodsAndImpostorsDuringFormationDoNotKeepTheRealNodeOut) {
  Process& n0 = start("node0", 0, {"--connect-timeout", "120", "--mesh-hold", "2"});
  ASSERT_TRUE(n0.waitForLog("waiting for node 1", seconds(10)));
  const std::string rss_before = rss(n0.pid());
  const long vm_before = statusKiB(n0.pid(), "VmSize");

  std::atomic<bool> stop{false};
  // Two impostors claiming node 1 (lanes 0 and 1, each from its own address): each holds its
  // socket until node 0 closes it, then claims again, for as long as the test runs.
  std::atomic<int> claims{0};
  auto claimer = [&](int lane) {
    while (!stop) {
      int fd = connectFrom(fmt::format("127.0.0.{}", 20 + lane), "127.0.0.1", port0_);
      if (fd < 0) break;  // node 0 stopped listening: the mesh formed
      if (auto first = readFrame(fd, seconds(5))) {
        sendAll(fd, claimNode1(*first, 2, static_cast<uint32_t>(lane)));
        ++claims;
        pollfd p{fd, POLLIN, 0};
        while (!stop && ::poll(&p, 1, 100) == 0) {
        }
      }
      resetClose(fd);
      std::this_thread::sleep_for(milliseconds(50));
    }
  };
  std::vector<std::thread> claimers;
  for (int lane = 0; lane < 2; ++lane) claimers.emplace_back(claimer, lane);
  // Idle sockets that never speak, from 8 addresses.
  std::vector<int> held;
  for (int i = 0; i < 64; ++i) {
    int fd = connectFrom(fmt::format("127.0.0.{}", 30 + i % 8), "127.0.0.1", port0_);
    if (fd >= 0) held.push_back(fd);
  }
  // Connect/reset flood from 4 addresses, bounded by count and time.
  std::atomic<int> cycles{0};
  std::atomic<bool> done{false};  // ends the current flood early
  auto flood = [&](int cycle_limit, seconds limit) {
    std::vector<std::thread> threads;
    for (int k = 0; k < 4; ++k) {
      threads.emplace_back([&, k] {
        auto end = std::chrono::steady_clock::now() + limit;
        while (!done && cycles < cycle_limit && std::chrono::steady_clock::now() < end) {
          int fd = connectFrom(fmt::format("127.0.0.{}", 40 + k), "127.0.0.1", port0_);
          if (fd < 0) {
            std::this_thread::sleep_for(milliseconds(1));
            continue;
          }
          resetClose(fd);
          ++cycles;
        }
      });
    }
    return threads;
  };
  // Warm-up: a short flood loads the code and the allocator arenas that any first handshakes
  // need; node 0's steady-state memory is measured after it (figures below print both).
  for (auto& t : flood(2'000, seconds(5))) t.join();
  std::this_thread::sleep_for(seconds(6));  // pre-authentication timeout (5 s) and reaping
  const std::string rss_warm = rss(n0.pid());
  cycles = 0;
  // Phase 1.
  for (auto& t : flood(20'000, seconds(25))) t.join();
  const int phase1_cycles = cycles.load();
  const std::string rss_peak = rss(n0.pid());
  // Every handshake thread is joined when it ends: a thread never joined keeps its stack
  // (8 MiB of address space each), so thousands of them would show here. What may grow is
  // bounded: malloc arenas (64 MiB of address space each; tpnode allows 2, node/main.cc) and
  // glibc's cache of joined threads' stacks.
  const long vm_growth = statusKiB(n0.pid(), "VmSize") - vm_before;
  EXPECT_LT(vm_growth, 16L << 20) << "KiB of address space after " << cycles.load() << " cycles";
  std::this_thread::sleep_for(seconds(6));  // pre-authentication timeout (5 s) and reaping
  const std::string rss_after_flood = rss(n0.pid());
  // Phase 2: the real node 1 arrives during the flood, while the impostors keep claiming.
  std::vector<std::thread> threads = flood(cycles.load() + 20'000, seconds(20));
  std::this_thread::sleep_for(seconds(1));
  Process& n1 = start("node1", 1, {"--connect-timeout", "120", "--mesh-hold", "2"});
  const bool joined = n0.waitForLog("[mesh] node 0/2 connected to all peers", seconds(15));
  stop = true;
  done = true;
  for (auto& t : threads) t.join();
  for (auto& t : claimers) t.join();
  const std::string rss_joined = rss(n0.pid());
  for (int fd : held) resetClose(fd);
  EXPECT_TRUE(joined) << "node 1 did not join within 15 s of arriving";
  EXPECT_EQ(n0.wait(seconds(30)), 0);
  EXPECT_EQ(n1.wait(seconds(30)), 0);
  std::cout << fmt::format(
      "[ figures ] node 0 RSS (KiB): {} before; {} after a 2,000-cycle warm-up; {} right after "
      "{} connect/reset cycles with 64 idle sockets and impostors claiming node 1; {} 6 s later; "
      "{} once node 1 joined during {} more cycles ({} claims of node 1 in all); address space "
      "+{} KiB after the first flood\n",
      rss_before, rss_warm, rss_peak, phase1_cycles, rss_after_flood, rss_joined,
      cycles.load() - phase1_cycles, claims.load(), vm_growth);
  RecordProperty("rss_before_kib", rss_before);
  RecordProperty("rss_warm_kib", rss_warm);
  RecordProperty("rss_after_flood_kib", rss_after_flood);
  EXPECT_GT(phase1_cycles, 1000);
  EXPECT_GE(claims.load(), 2);
  EXPECT_NE(n0.log().find("a peer claiming node 1"), std::string::npos);
}

}  // namespace
}  // namespace tpnode::mesh::test
