// Test helper: a serving tpnode cluster of real processes on loopback, for the tests that talk
// to its API while it runs (tests/support/cluster_run.h runs batch clusters to completion).
//
// - Every node gets --model (the workers: worker_model when the spec names one), the spec's
//   arguments and, with more than one node, --node-id and
//   --peers (free loopback ports, tests/mesh/free_ports.h); node 0 also --port (a free port)
//   and its own arguments. The cluster secret: --cluster-secret-file when the spec names one,
//   else a random one of this cluster's own in TPNODE_CLUSTER_SECRET.
// - Node N's output goes to <log_dir>/<tag>_n<N>.log (a restarted node: <tag>_n<N>_<suffix>.log).
// - Nothing starts in the constructor: start() starts one node (killing the process that had
//   that node, if any), startAll() every node, workers first.
// - The destructor stops what still runs: SIGTERM to node 0 (unless it was seen to exit), then
//   every node is waited for (30 s each, killed after). expectCleanShutdown() does the same and
//   expects exit 0 from every node, with its log.
// - One thread uses a ServingCluster; the HTTP calls may come from any thread (they only read
//   the port).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/mesh/free_ports.h"
#include "tests/mesh/process.h"
#include "tests/support/http_client.h"

namespace tpnode::testing_support {

struct ServingSpec {
  std::string model;
  int nodes = 1;
  std::vector<std::string> args = {};        // every node, after --model
  std::vector<std::string> node0_args = {};  // node 0 only, after args
  std::string tag;                           // log file names
  std::string log_dir = {};                  // "": ::testing::TempDir()
  std::string secret_file = {};              // --cluster-secret-file; "": a random secret
  std::string worker_model = {};             // the workers' --model; "": model
};

class ServingCluster {
 public:
  explicit ServingCluster(ServingSpec spec)
      : spec_(std::move(spec)),
        peers_(mesh::test::loopbackPeers(spec_.nodes)),
        port_(mesh::test::freePort()),
        secret_env_("TPNODE_CLUSTER_SECRET=" + mesh::test::randomSecretHex()),
        nodes_(static_cast<size_t>(spec_.nodes)) {
    if (spec_.log_dir.empty()) spec_.log_dir = ::testing::TempDir();
  }
  ~ServingCluster() { stop(); }
  ServingCluster(const ServingCluster&) = delete;
  ServingCluster& operator=(const ServingCluster&) = delete;

  // Starts node `n` with `env` added to its environment; a node started again (the test killed
  // or stopped it) logs to a file of its own, named with `log_suffix`.
  mesh::test::Process& start(int n, std::vector<std::string> env = {},
                             const std::string& log_suffix = {}) {
    const bool own_model = n != 0 && !spec_.worker_model.empty();
    std::vector<std::string> a = {"--model", own_model ? spec_.worker_model : spec_.model};
    a.insert(a.end(), spec_.args.begin(), spec_.args.end());
    if (spec_.nodes > 1) a.insert(a.end(), {"--node-id", std::to_string(n), "--peers", peers_});
    if (!spec_.secret_file.empty()) {
      a.insert(a.end(), {"--cluster-secret-file", spec_.secret_file});
    } else {
      env.push_back(secret_env_);
    }
    if (n == 0) {
      a.insert(a.end(), {"--port", std::to_string(port_)});
      a.insert(a.end(), spec_.node0_args.begin(), spec_.node0_args.end());
    }
    std::string log = spec_.log_dir + "/" + spec_.tag + "_n" + std::to_string(n);
    if (!log_suffix.empty()) log += "_" + log_suffix;
    auto& slot = nodes_.at(static_cast<size_t>(n));
    slot.reset();  // a process still there is killed first
    slot = std::make_unique<mesh::test::Process>(a, std::move(env), log + ".log");
    return *slot;
  }
  // Every node, workers first, each with `env` added to its environment.
  void startAll(const std::vector<std::string>& env = {}) {
    for (int n = spec_.nodes - 1; n >= 0; --n) start(n, env);
  }

  // Node 0's own arguments from its next start() on (a node 0 restarted with others).
  void setNode0Args(std::vector<std::string> args) { spec_.node0_args = std::move(args); }

  mesh::test::Process& node(int n) { return *nodes_.at(static_cast<size_t>(n)); }
  uint16_t port() const { return port_; }

  test::HttpResponse get(const std::string& path, double timeout_s = 10) const {
    return test::httpRequest("127.0.0.1", port_, "GET", path, "", timeout_s);
  }
  test::HttpResponse post(const std::string& path, const nlohmann::json& body,
                          double timeout_s = 60) const {
    return test::httpRequest("127.0.0.1", port_, "POST", path, body.dump(), timeout_s);
  }
  test::HttpResponse complete(const nlohmann::json& body, double timeout_s = 60) const {
    return post("/v1/completions", body, timeout_s);
  }
  // Polls /health until it answers `status`; false after `timeout`.
  bool awaitHealth(int status, std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (get("/health", 5).status == status) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  // A sample of node 0's /metrics without labels (-1 when it is missing).
  double metric(const std::string& name) const {
    const std::string body = get("/metrics").body;
    for (size_t at = body.find(name); at != std::string::npos; at = body.find(name, at + 1)) {
      if ((at == 0 || body[at - 1] == '\n') && body.compare(at + name.size(), 1, " ") == 0) {
        return std::stod(body.substr(at + name.size() + 1));
      }
    }
    return -1;
  }
  // The sum of a labeled family's series on node 0's /metrics whose labels contain `labels`
  // (every series when empty); -1 when there is none.
  double metricSum(const std::string& name, const std::string& labels = "") const {
    const std::string body = get("/metrics").body;
    const std::regex series("\n" + name + R"(\{([^}]*)\} ([0-9.e+]+))");
    double sum = -1;
    for (std::sregex_iterator it(body.begin(), body.end(), series), end; it != end; ++it) {
      if ((*it)[1].str().find(labels) == std::string::npos) continue;
      sum = std::max(sum, 0.0) + std::stod((*it)[2]);
    }
    return sum;
  }
  // Every running node's log, each under a header line.
  std::string logs() const {
    std::string out;
    for (size_t n = 0; n < nodes_.size(); ++n) {
      if (nodes_[n]) out += "--- node " + std::to_string(n) + " ---\n" + nodes_[n]->log();
    }
    return out;
  }

  // SIGTERM to node 0 (it shuts the cluster down), then every node must exit 0.
  void expectCleanShutdown() {
    using namespace std::chrono_literals;
    if (nodes_.at(0) && !nodes_[0]->exited()) nodes_[0]->signal(SIGTERM);
    for (size_t n = 0; n < nodes_.size(); ++n) {
      if (!nodes_[n]) continue;
      EXPECT_EQ(nodes_[n]->wait(30s), 0) << "node " << n << ":\n" << nodes_[n]->log();
      nodes_[n].reset();
    }
  }

 private:
  void stop() {
    using namespace std::chrono_literals;
    if (!nodes_.empty() && nodes_[0] && !nodes_[0]->exited()) nodes_[0]->signal(SIGTERM);
    for (auto& p : nodes_) {
      if (p) p->wait(30s);
      p.reset();
    }
  }

  ServingSpec spec_;
  std::string peers_;
  uint16_t port_;
  std::string secret_env_;
  std::vector<std::unique_ptr<mesh::test::Process>> nodes_;
};

}  // namespace tpnode::testing_support
