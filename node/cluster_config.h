// The YAML cluster config (`--config FILE`): every node of the cluster, the model, secrets,
// timeouts, wire format and API settings in one file that every host can share.
//
// Contract
// - loadClusterConfig() parses and validates; every problem is Error(kInvalidArgument) naming
//   the file, the field path (e.g. `nodes[1].port`), the value and what to do. Unknown keys are
//   errors (a typo must not be silently ignored).
// - The `cluster` and `api` sections hold the settings whose row in the settings table
//   (common/settings.h) has a YAML key; their keys, types, choices and ranges come from there.
// - The result is plain data. applyClusterConfig() copies it into Options for every field
//   the command line (or TPNODE_* environment) did not set: flags override the file.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
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
  // The `cluster` and `api` keys given, by the long flag name of their setting ("model",
  // "step-timeout"), as checked text; paths already resolved against the file's folder.
  std::map<std::string, std::string, std::less<>> values;

  // The value given for the setting of `flag`, if any.
  std::optional<std::string> value(std::string_view flag) const;
};

// `text` is YAML; `source` names it in messages.
ClusterConfig parseClusterConfig(const std::string& text, const std::string& source);
ClusterConfig loadClusterConfig(const std::string& path);

// Fills `options` from `config` for every flag not in `explicit_flags` (flag names without
// dashes, e.g. "peers"), then checks that options.node_id names a node of the config.
void applyClusterConfig(const ClusterConfig& config, const std::set<std::string>& explicit_flags,
                        Options& options);

}  // namespace tpnode::node
