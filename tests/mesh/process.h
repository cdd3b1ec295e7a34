// Test helper: runs a tpnode process (or, given `bin`, another executable such as tptopo) with
// its output in a file, waits for it with a deadline, and kills it if the test ends first.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/test_env.h"

extern char** environ;

namespace tpnode::mesh::test {

// "TPNODE_CLUSTER_SECRET=<64 hex digits>": one random 32-byte cluster secret per test program,
// for the environment of every node of a test cluster (Process drops the caller's own).
// 32 random bytes as 64 hex digits (what `tpnode gen-secret` writes).
inline std::string randomSecretHex() {
  std::random_device rd;
  const char* hex = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 64; ++i) out += hex[rd() % 16];
  return out;
}

inline const std::string& testClusterSecretEnv() {
  static const std::string env = "TPNODE_CLUSTER_SECRET=" + randomSecretHex();
  return env;
}

// A fresh folder under the system's temporary directory ($TMPDIR or /tmp); "" on failure.
inline std::string makeTempDir(const std::string& prefix) {
  std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "XXXXXX")).string();
  return ::mkdtemp(pattern.data()) ? pattern : std::string();
}

class Process {
 public:
  Process(std::vector<std::string> args, std::vector<std::string> env, std::string log_path,
          const std::string& executable = {})
      : log_path_(std::move(log_path)) {
    std::string bin =
        executable.empty() ? testing_support::testEnv("TPNODE_BIN").value_or("") : executable;
    if (bin.empty()) throw std::runtime_error("TPNODE_BIN is not set (run through ctest)");
    args.insert(args.begin(), bin);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::string(*e).rfind("TPNODE_CLUSTER_SECRET", 0) != 0) env.push_back(*e);
    }
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    if (posix_spawn(&pid_, bin.c_str(), &actions, nullptr, argv.data(), envp.data()) != 0) {
      throw std::runtime_error(std::string("cannot start ") + bin);
    }
    posix_spawn_file_actions_destroy(&actions);
  }
  ~Process() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGCONT);
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  // The exit code, or -1 when it did not exit in time (it is killed then), 128+N for signal N.
  int wait(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!exited_) {
      int status = 0;
      pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        exited_ = true;
        code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        ::kill(pid_, SIGCONT);
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        exited_ = true;
        code_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return code_;
  }
  void signal(int sig) { ::kill(pid_, sig); }
  // True once wait() has seen it exit (its pid may then belong to another process: signal no
  // more).
  bool exited() const { return exited_; }
  pid_t pid() const { return pid_; }

  std::string log() const {
    std::ifstream in(log_path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // Waits until the log contains `text`; false at the timeout.
  bool waitForLog(const std::string& text, std::chrono::milliseconds timeout) const {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (log().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

 private:
  std::string log_path_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int code_ = -1;
};

}  // namespace tpnode::mesh::test
