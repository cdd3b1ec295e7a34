// Test helper: a tpnode cluster of real processes on loopback (one process per node, workers
// started first), each node's output in <TempDir>/<tag>_n<node>.log, waited for with a
// deadline. Node 0's --json line (the log line starting with '{') is parsed into `output`.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/mesh/free_ports.h"
#include "tests/mesh/process.h"

namespace tpnode::testing_support {

struct ClusterSpec {
  std::string model;
  int nodes = 1;
  int tp = 1;                                // ranks on every node
  std::vector<int> tps = {};                 // ranks per node instead of `tp` (--tp-layout)
  std::vector<std::string> all_args = {};    // every node
  std::vector<std::string> node0_args = {};  // node 0 only, after all_args
  std::string tag;                           // log file names
  std::string log_level = "warn";
};

struct ClusterRun {
  std::vector<int> node_rc;  // exit codes by node
  std::vector<std::string> logs;
  nlohmann::json output;  // node 0's --json line (null when it printed none)
};

inline ClusterRun runCluster(const ClusterSpec& spec) {
  using namespace std::chrono_literals;
  const std::string peers = mesh::test::loopbackPeers(spec.nodes);
  std::vector<int> tps = spec.tps;
  if (tps.empty()) tps.assign(static_cast<size_t>(spec.nodes), spec.tp);
  std::string layout;
  for (int t : tps) layout += (layout.empty() ? "" : ",") + std::to_string(t);
  std::vector<std::unique_ptr<mesh::test::Process>> procs;
  for (int n = spec.nodes - 1; n >= 0; --n) {
    std::vector<std::string> a = {"--model",
                                  spec.model,
                                  "--node-id",
                                  std::to_string(n),
                                  "--peers",
                                  peers,
                                  "--tp",
                                  std::to_string(tps[static_cast<size_t>(n)]),
                                  "--tp-layout",
                                  layout,
                                  "--connect-timeout",
                                  "30",
                                  "--log-level",
                                  spec.log_level};
    a.insert(a.end(), spec.all_args.begin(), spec.all_args.end());
    if (n == 0) a.insert(a.end(), spec.node0_args.begin(), spec.node0_args.end());
    procs.push_back(std::make_unique<mesh::test::Process>(
        a, std::vector<std::string>{mesh::test::testClusterSecretEnv()},
        ::testing::TempDir() + "/" + spec.tag + "_n" + std::to_string(n) + ".log"));
  }
  std::reverse(procs.begin(), procs.end());
  ClusterRun run;
  for (auto& p : procs) run.node_rc.push_back(p->wait(90s));
  for (auto& p : procs) run.logs.push_back(p->log());
  // Node 0's stdout and stderr share the log; the JSON object is the line starting with '{'.
  std::istringstream lines(run.logs[0]);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line[0] == '{') run.output = nlohmann::json::parse(line);
  }
  return run;
}

// Every node exited 0 and node 0 printed its JSON line (fatal failures, with the logs).
inline void expectAllExitedOk(const ClusterRun& run) {
  for (size_t n = 0; n < run.node_rc.size(); ++n) {
    ASSERT_EQ(run.node_rc[n], 0) << "node " << n << " log:\n" << run.logs[n];
  }
  ASSERT_TRUE(run.output.is_object()) << run.logs[0];
}

}  // namespace tpnode::testing_support
