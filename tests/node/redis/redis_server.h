// Test fixture: a real redis-server started by the test on a free loopback port, in a fresh
// temporary folder (no persistence), killed at the end. Tests skip with the reason when
// redis-server is not installed (tools/install-deps.sh installs it; CMake finds it as
// TPNODE_REDIS_SERVER). TPNODE_REDIS_SERVER in the environment names another executable (the
// GPU bundle's, tools/gpu-check.sh, which carries Debian's redis-server with its libraries).
#pragma once

#include <cstdlib>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "node/redis/redis_client.h"
#include "tests/mesh/free_ports.h"
#include "tests/mesh/process.h"
#include "tests/support/test_env.h"

namespace tpnode::node::redis::test {

// The redis-server executable: $TPNODE_REDIS_SERVER when set, else the one CMake found; ""
// when that file is not there (a binary built here and run on another host).
inline std::string redisServerBinary() {
  const std::string path =
      testing_support::testEnv("TPNODE_REDIS_SERVER").value_or(TPNODE_REDIS_SERVER);
  std::error_code ec;
  return !path.empty() && std::filesystem::is_regular_file(path, ec) ? path : std::string();
}

inline constexpr const char* kNoRedisReason =
    "skipped: redis-server is not installed (tools/install-deps.sh installs Debian's "
    "redis-server)";

class RedisServer {
 public:
  // Starts it; ok() tells whether it answers PING within 10 s (why() says why not).
  explicit RedisServer(std::vector<std::string> extra_args = {})
      : extra_args_(std::move(extra_args)) {
    dir_ = mesh::test::makeTempDir("tpnode-redis-");
    port_ = mesh::test::freePort();
    start();
  }
  ~RedisServer() {
    process_.reset();
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  bool ok() const { return ok_; }
  const std::string& why() const { return why_; }
  uint16_t port() const { return port_; }
  const std::string& dir() const { return dir_; }
  std::string url(const std::string& credentials = {}) const {
    return "redis://" + credentials + "127.0.0.1:" + std::to_string(port_);
  }
  RedisEndpoint endpoint() const { return parseRedisUrl(url()); }

  // SIGKILL: the server is gone at once, mid-whatever.
  void kill() {
    if (process_) process_->wait(std::chrono::milliseconds(0));  // kills and reaps
    process_.reset();
  }
  // A fresh server on the same port (empty: nothing was persisted).
  bool restart() {
    kill();
    start();
    return ok_;
  }
  // Stops answering (SIGSTOP) without closing connections; resume() continues it.
  void pause() {
    if (process_) process_->signal(SIGSTOP);
  }
  void resume() {
    if (process_) process_->signal(SIGCONT);
  }

 private:
  void start() {
    ok_ = false;
    if (redisServerBinary().empty()) {
      why_ = kNoRedisReason;
      return;
    }
    if (dir_.empty()) {
      why_ = "cannot create a temporary folder";
      return;
    }
    std::vector<std::string> args = {
        "--port", std::to_string(port_), "--bind", "127.0.0.1", "--save",
        "",       "--appendonly",        "no",     "--dir",     dir_};
    args.insert(args.end(), extra_args_.begin(), extra_args_.end());
    process_ = std::make_unique<mesh::test::Process>(args, std::vector<std::string>{},
                                                     dir_ + "/redis.log", redisServerBinary());
    // Ready when the port accepts connections (PING may need a password).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      if (process_->log().find("Ready to accept connections") != std::string::npos) {
        ok_ = true;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    why_ = "redis-server did not start within 10 s: " + process_->log();
  }

  std::vector<std::string> extra_args_;
  std::string dir_;
  uint16_t port_ = 0;
  std::unique_ptr<mesh::test::Process> process_;
  bool ok_ = false;
  std::string why_;
};

}  // namespace tpnode::node::redis::test
