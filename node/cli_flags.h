// The command line generated from the settings table (common/settings.h), and the flags tpnode
// shares with tools that join its mesh (tools/tptopo): the Cluster and Security groups, read
// from flags, environment variables (TPNODE_<FLAG>, with the table's exceptions) and the YAML
// --config, with the same names, defaults and precedence everywhere.
//
// Contract: addSettingFlags() (node/settings_cli.h) registers options that capture text into
// `texts`, which must outlive the parse; applyFlagTexts() then checks each given text against
// the table and stores it in Options (node/settings_binding.h). Precedence: command line >
// environment > --config.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "common/settings.h"
#include "node/options.h"
#include "node/settings_cli.h"

namespace tpnode::node {

// After app.parse(): stores every flag the command line or the environment gave into `options`
// (settings::Source::kCommandLine). Throws Error(kInvalidArgument) naming the flag.
void applyFlagTexts(const CLI::App& app, const FlagTexts& texts, Options& options);

// The Cluster and Security groups (settings::Scope::kCluster): --config, --node-id, --peers,
// --tp, --devices, transports, timeouts, secrets, ...
void addClusterFlags(CLI::App& app, FlagTexts& texts);

// After app.parse() and applyFlagTexts(): applies the --config file to every flag the command
// line and environment did not set, and checks the layout (finishLayout). Throws
// Error(kInvalidArgument) naming the problem.
void finishClusterFlags(const CLI::App& app, Options& options);

}  // namespace tpnode::node
