// The command-line flags tpnode shares with tools that join its mesh (tools/tptopo): the
// Cluster and Security groups, read from flags, TPNODE_<FLAG> environment variables and the
// YAML --config, with the same names, defaults and precedence everywhere.
#pragma once

#include <set>
#include <string>

#include <CLI/CLI.hpp>

#include "node/options.h"

namespace tpnode::node {

// TPNODE_<FLAG>: upper case, '-' -> '_'.
std::string flagEnvName(const std::string& flag);

// Adds --name (and `short_name`, e.g. "-m", when given) bound to `value`, also read from
// TPNODE_<NAME>, with its default in --help.
template <typename T>
CLI::Option* addFlag(CLI::App& app, const std::string& name, T& value, const std::string& help,
                     const std::string& short_name = {}) {
  const std::string names = short_name.empty() ? "--" + name : short_name + ",--" + name;
  return app.add_option(names, value, help)->envname(flagEnvName(name))->capture_default_str();
}

// The long names of every option the command line or the environment set.
std::set<std::string> givenFlags(const CLI::App& app);

// --config, --node-id, --peers, --mesh-listen, --tp, --tp-layout (into `tp_layout`), --devices,
// --backend, --connect-timeout, --liveness-timeout, --sockets-per-peer, --wire-format and the
// Security flags. `tp_layout` must outlive the parse.
void addClusterFlags(CLI::App& app, Options& options, std::string& tp_layout);

// After app.parse(): parses --tp-layout, applies the --config file to every flag the command
// line and environment did not set, and checks the layout (finishLayout). Throws
// Error(kInvalidArgument) naming the problem.
void finishClusterFlags(const CLI::App& app, const std::string& tp_layout, Options& options);

}  // namespace tpnode::node
