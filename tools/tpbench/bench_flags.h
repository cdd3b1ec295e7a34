// tpbench's flags (`tpbench allreduce ...`): declared once in tpbench's own settings table (rows
// of common/settings.h, Scope::kTpbench: tpbench shares some names with tpnode's flags but has
// its own defaults and reads no environment variable for them), registered and checked by the
// generator of node/settings_cli.h, and documented in docs/tpbench.md (a test checks the
// table there against these rows).
#pragma once

#include <span>
#include <string>

#include <CLI/CLI.hpp>

#include "common/settings.h"
#include "node/settings_cli.h"
#include "tools/tpbench/allreduce_bench.h"

namespace tpnode::tools {

// Every flag of `tpbench allreduce` as given; toBenchOptions() turns them into the run's
// options. Defaults are the table's.
struct BenchFlags {
  int node_id = 0;
  std::string peers;  // empty: one node
  int tp = 1;
  std::string sizes = "4K,16K,64K,1M,16M,64M";
  std::string dtype = "f32";
  bool json = false;
  int iters = 0;
  std::string algo = "auto";
  std::string small_algo = "auto";
  std::string hier = "auto";
  std::string wire = "native";
  long long crossover = -1;  // < 0: TPNODE_COLL_CROSSOVER or the collectives' default
  long long chunk = -1;      // <= 0: TPNODE_COLL_CHUNK or the default
  long long leader_max = -1;
  long long spin_us = -1;
  int mesh_spin_us = 200;
  int sockets_per_peer = 2;
  int socket_buffer = 0;
  std::string cluster_secret_file;
  bool insecure = false;
  double connect_timeout_s = 60;
  double liveness_timeout_s = 5;
  std::string log_level = "warn";
};

// tpbench's table, in --help order.
std::span<const settings::Setting> tpbenchSettings();
// The BenchFlags member of every row.
std::span<const node::FieldBinding<BenchFlags>> benchFieldBindings();

// Registers every row on `allreduce` (the subcommand); after parsing, applyBenchFlags() checks
// and stores what was given (Error(kInvalidArgument) naming the flag).
void addBenchFlags(CLI::App& allreduce, node::FlagTexts& texts);
void applyBenchFlags(const CLI::App& allreduce, const node::FlagTexts& texts, BenchFlags& flags);

// The run's options: the collectives' from TPNODE_COLL_* (collectives::CollectiveOptions::
// fromEnv), overridden by --algo/--small-algo/--hier/--wire when they differ from their default
// or the variable is unset, and by --crossover/--chunk/--leader-max/--spin-us when given.
// Error(kInvalidArgument) for bad sizes or --tp < 1.
AllReduceBenchOptions toBenchOptions(const BenchFlags& flags);

}  // namespace tpnode::tools
