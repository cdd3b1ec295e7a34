// The API of a real tpnode process (one node, a generated model) under hostile clients, on
// loopback: bodies nested 100,000 levels deep in every field of both endpoints get 400 and the
// process lives; a flood of idle connections neither exhausts its descriptors nor stops /health
// from answering. The resident memory (VmRSS) of the process is printed before and after each
// flood and must come back to within 10 % of where it started. Once the ranks have loaded, the
// model file's mapping holds no resident pages (the ranks have their own copies).
#include <dirent.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/mesh/free_ports.h"
#include "tests/mesh/process.h"
#include "tests/node/api/deep_json.h"
#include "tests/support/http_client.h"
#include "tests/support/small_model.h"

namespace tpnode::node {
namespace {

using mesh::test::Process;
using namespace std::chrono_literals;

constexpr int kMaxConnections = 64;

// VmRSS of `pid` in KiB (0 when unreadable).
long rssKib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return 0;
}

// Resident KiB of `pid`'s mappings of the file `path` (/proc/PID/smaps), -1 when it maps none.
long mappedFileRssKib(pid_t pid, const std::string& path) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps");
  std::string line;
  bool in_file = false, found = false;
  long kib = 0;
  while (std::getline(in, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2) {  // a mapping's first line
      in_file = line.size() >= path.size() &&
                line.compare(line.size() - path.size(), path.size(), path) == 0;
      found = found || in_file;
    } else if (in_file && line.rfind("Rss:", 0) == 0) {
      kib += std::stol(line.substr(4));
    }
  }
  return found ? kib : -1;
}

int openDescriptors(pid_t pid) {
  DIR* dir = ::opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
  if (dir == nullptr) return -1;
  int n = 0;
  while (::readdir(dir) != nullptr) ++n;
  ::closedir(dir);
  return n - 2;  // . and ..
}

int connectLoopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

class ApiLimitsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = mesh::test::makeTempDir("api_limits_");
    ASSERT_FALSE(dir_.empty());
    model_ = dir_ + "/model.gguf";
    testing_support::writeSmallTestModel(model_);
  }

  void SetUp() override {
    port_ = mesh::test::freePort();
    node0_ = std::make_unique<Process>(
        std::vector<std::string>{"--model", model_, "--port", std::to_string(port_), "--parallel",
                                 "2", "--ctx-size", "256", "--max-connections",
                                 std::to_string(kMaxConnections)},
        std::vector<std::string>{}, dir_ + "/node0.log");
    auto deadline = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < deadline && health().status != 200) {
      std::this_thread::sleep_for(100ms);
    }
    ASSERT_EQ(health().status, 200) << node0_->log();
  }

  void TearDown() override {
    if (!node0_) return;
    node0_->signal(SIGTERM);
    EXPECT_EQ(node0_->wait(30s), 0) << node0_->log();
  }

  test::HttpResponse health() {
    return test::httpRequest("127.0.0.1", port_, "GET", "/health", "", 5);
  }

  // Prints the figures and checks that RSS came back to within 10 %: `before` is taken after two
  // floods (the allocator's arenas and the first pages of the caches are in use by then),
  // `after` after three more.
  void expectRssBack(const char* what, long cold, long before, long after) {
    std::printf(
        "[rss] %s: node 0 VmRSS %ld KiB at start, %ld KiB after two floods, %ld KiB after "
        "three more (%+.1f %%)\n",
        what, cold, before, after,
        100.0 * static_cast<double>(after - before) / static_cast<double>(before));
    ::testing::Test::RecordProperty(std::string(what) + "_rss_before_kib", std::to_string(before));
    ::testing::Test::RecordProperty(std::string(what) + "_rss_after_kib", std::to_string(after));
    EXPECT_LE(after, before + before / 10) << what;
  }

  static inline std::string dir_, model_;
  uint16_t port_ = 0;
  std::unique_ptr<Process> node0_;
};

TEST_F(ApiLimitsTest, TheModelFileIsNotResidentOnceTheRanksHaveLoaded) {
  std::ifstream f(model_, std::ios::binary | std::ios::ate);
  const long file_kib = static_cast<long>(f.tellg()) / 1024;
  const long mapped_kib = mappedFileRssKib(node0_->pid(), model_);
  std::printf("[rss] model file %ld KiB, resident in node 0's mapping: %ld KiB\n", file_kib,
              mapped_kib);
  ASSERT_GE(mapped_kib, 0) << "node 0 does not map " << model_;
  // Loading read every byte (the identity hash, every tensor); what stays is at most a few pages.
  EXPECT_LT(mapped_kib, file_kib / 4) << node0_->log();
}

TEST_F(ApiLimitsTest, DeepJsonOnEveryFieldOfBothEndpointsGets400) {
  const long cold = rssKib(node0_->pid());
  long before = 0;
  int requests = 0;
  for (int round = 0; round < 5; ++round) {
    for (bool objects : {false, true}) {
      const std::string deep = node::api::testing::nested(100'000, objects);
      for (const auto& [ep, body] : node::api::testing::everyFieldTemplate()) {
        test::HttpResponse r =
            test::httpRequest("127.0.0.1", port_, "POST", node::api::testing::endpointPath(ep),
                              node::api::testing::withValue(body, deep), 10);
        ++requests;
        ASSERT_EQ(r.status, 400) << body << "\n" << node0_->log();
        EXPECT_NE(r.body.find("json_too_deep"), std::string::npos) << r.body;
      }
    }
    ASSERT_EQ(health().status, 200) << node0_->log();
    test::HttpResponse ok = test::httpRequest("127.0.0.1", port_, "POST", "/v1/completions",
                                              R"({"prompt": "a b", "max_tokens": 2})", 30);
    EXPECT_EQ(ok.status, 200) << ok.body;
    if (round == 1) before = rssKib(node0_->pid());
  }
  std::printf("[deep-json] %d requests of 0.2-0.6 MB, each answered 400\n", requests);
  expectRssBack("deep_json", cold, before, rssKib(node0_->pid()));
}

TEST_F(ApiLimitsTest, IdleConnectionFloodKeepsHealthAnsweringWithBoundedDescriptors) {
  // As many idle connections as this process may open, up to 3000.
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = std::min<rlim_t>(lim.rlim_max, 4096);
    ::setrlimit(RLIMIT_NOFILE, &lim);
    ::getrlimit(RLIMIT_NOFILE, &lim);
  }
  const int flood = static_cast<int>(std::min<rlim_t>(3000, lim.rlim_cur - 200));
  ASSERT_GT(flood, 2 * kMaxConnections) << "RLIMIT_NOFILE is too low for a flood";
  const pid_t pid = node0_->pid();
  const long cold = rssKib(pid);
  long before = 0;
  const int fds_before = openDescriptors(pid);
  std::vector<int> sockets;
  int peak_fds = fds_before;
  for (int round = 0; round < 5; ++round) {  // memory must not grow per flood
    for (int i = 0; i < flood; ++i) {
      int fd = connectLoopback(port_);
      if (fd >= 0) sockets.push_back(fd);
      if (i % 500 == 0) peak_fds = std::max(peak_fds, openDescriptors(pid));
    }
    ASSERT_GE(static_cast<int>(sockets.size()), flood * 9 / 10) << "connects failed";
    // The flood is still open: /health answers, and node 0 holds a bounded number of sockets.
    for (int i = 0; i < 3; ++i) {
      test::HttpResponse h = health();
      EXPECT_EQ(h.status, 200) << "flood round " << round << ": " << h.body;
    }
    peak_fds = std::max(peak_fds, openDescriptors(pid));
    std::printf(
        "[flood] round %d: %zu idle connections open, node 0 holds %d descriptors "
        "(%d before the flood)\n",
        round, sockets.size(), openDescriptors(pid), fds_before);
    for (int fd : sockets) ::close(fd);
    sockets.clear();
    std::this_thread::sleep_for(500ms);
    if (round == 1) before = rssKib(pid);
  }
  EXPECT_LE(peak_fds, fds_before + 2 * kMaxConnections + 16)
      << "node 0's descriptors grew with the flood";
  EXPECT_EQ(health().status, 200);
  std::this_thread::sleep_for(1s);
  expectRssBack("idle_flood", cold, before, rssKib(pid));
}

}  // namespace
}  // namespace tpnode::node
