// The YAML cluster config (`--config FILE`): every node of the cluster, the model, secrets,
// timeouts, wire format and API settings in one file that every host can share.
//
// Contract
// - loadClusterConfig() parses and validates; every problem is Error(kInvalidArgument) naming
//   the file, the field path (e.g. `nodes[1].port`), the value and what to do. Unknown keys are
//   errors (a typo must not be silently ignored).
// - The result is plain data. applyClusterConfig() copies it into Options for every field
//   the command line (or TPNODE_* environment) did not set: flags override the file.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "node/options.h"

namespace tpnode::node {

struct NodeSpec {
  std::string host;
  int port = 0;
  int tp = 1;
  std::vector<int> devices;  // empty: local rank r uses device r
};

struct ClusterConfig {
  std::string source;  // file name, for messages
  std::vector<NodeSpec> nodes;
  std::optional<std::string> model;
  std::optional<std::string> secret_file;
  std::optional<bool> insecure;  // cluster.insecure: the --insecure flag
  std::optional<double> connect_timeout_s;
  std::optional<double> liveness_timeout_s;
  std::optional<int> sockets_per_peer;
  std::optional<std::string> wire_format;  // f32 (default), bf16, q8_0
  std::optional<std::string> head;         // auto (default), vocab-parallel, replicated
  std::optional<std::string> backend;
  std::optional<int> threads;
  std::optional<int> ctx_size;
  std::optional<std::string> api_host;
  std::optional<int> api_port;
  std::optional<std::string> api_key_file;
  std::optional<int> parallel;
};

// `text` is YAML; `source` names it in messages.
ClusterConfig parseClusterConfig(const std::string& text, const std::string& source);
ClusterConfig loadClusterConfig(const std::string& path);

// Fills `options` from `config` for every flag not in `explicit_flags` (flag names without
// dashes, e.g. "peers"), then checks that options.node_id names a node of the config.
void applyClusterConfig(const ClusterConfig& config, const std::set<std::string>& explicit_flags,
                        Options& options);

}  // namespace tpnode::node
