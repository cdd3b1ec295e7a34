// The command line generated from the settings table (common/settings.h), and the flags tpnode
// shares with tools that join its mesh (tools/tptopo): the Cluster and Security groups, read
// from flags, environment variables (TPNODE_<FLAG>, with the table's exceptions) and the YAML
// --config, with the same names, defaults and precedence everywhere.
//
// Contract: addSettingFlags() registers options that capture text into `texts`, which must
// outlive the parse; applyFlagTexts() then checks each given text against the table and stores
// it in Options (node/settings_binding.h). Precedence: command line > environment > --config.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/settings.h"
#include "node/options.h"

namespace tpnode::node {

// What CLI11 captured, by long flag name, before it is checked and converted.
struct FlagTexts {
  std::map<std::string, std::string, std::less<>> text;
  std::map<std::string, bool, std::less<>> on;                        // settings::Type::kBool
  std::map<std::string, std::vector<std::string>, std::less<>> list;  // kStringList
};

// The environment variable of declared flag `flag` (TPNODE_<FLAG> or the table's exception).
// Error(kInternal) for a flag the table does not declare.
std::string flagEnvName(const std::string& flag);

// Adds --name (and `short_name`, e.g. "-m", when given) bound to `value`, also read from the
// table's environment variable, with its default in --help (tools' own flags: tools/tptopo).
template <typename T>
CLI::Option* addFlag(CLI::App& app, const std::string& name, T& value, const std::string& help,
                     const std::string& short_name = {}) {
  const std::string names = short_name.empty() ? "--" + name : short_name + ",--" + name;
  return app.add_option(names, value, help)->envname(flagEnvName(name))->capture_default_str();
}

// Adds every flag of `scope` in the table: names, environment variable, default, help, group.
void addSettingFlags(CLI::App& app, settings::Scope scope, FlagTexts& texts);

// After app.parse(): stores every flag the command line or the environment gave into `options`
// (settings::Source::kCommandLine). Throws Error(kInvalidArgument) naming the flag.
void applyFlagTexts(const CLI::App& app, const FlagTexts& texts, Options& options);

// The long names of every option the command line or the environment set.
std::set<std::string> givenFlags(const CLI::App& app);

// The Cluster and Security groups (settings::Scope::kCluster): --config, --node-id, --peers,
// --tp, --devices, transports, timeouts, secrets, ...
void addClusterFlags(CLI::App& app, FlagTexts& texts);

// After app.parse() and applyFlagTexts(): applies the --config file to every flag the command
// line and environment did not set, and checks the layout (finishLayout). Throws
// Error(kInvalidArgument) naming the problem.
void finishClusterFlags(const CLI::App& app, Options& options);

}  // namespace tpnode::node
