// What tptopo is told: the cluster flags it shares with tpnode (node/cli_flags.h: --node-id,
// --peers, --config, --tp, secrets, timeouts; also TPNODE_<FLAG>), tpnode's --json and
// --log-level, and its own measuring knobs. Every flag is a row of common/settings_table.cc
// (its own: Scope::kTptopo), registered and checked by the generator of node/settings_cli.h
// (topo_cli.cc; this header names only the bindings, node/field_binding.h).
#pragma once

#include <span>
#include <vector>

#include "common/settings.h"
#include "node/field_binding.h"
#include "node/options.h"

namespace tpnode::tptopo {

struct TopoOptions {
  node::Options node;  // cluster, security and placement flags, --json and --log-level
  // CPU
  int mem_mib = 64;  // per thread
  int mem_reps = 3;
  // GPU
  bool skip_gpu = false;
  int gpu_mib = 64;  // P2P, staging and NCCL message size
  // Links
  int rtt_rounds = 200;
  int bw_mib = 8;                // per message
  int bw_rounds = 8;             // messages per direction
  double min_link_gbps = 0.5;    // below: degraded
  double max_rtt_p99_us = 5000;  // above: degraded
  // All-reduce
  int allreduce_iters = 20;
  // The whole run: 0 = connect timeout + 300 s.
  double timeout_s = 0;
  // Plan: the model whose --split auto plans node 0 reports on the measured links ("": none).
  std::string plan_model;
  int plan_parallel = 1;
};

enum class ParseOutcome { kRun, kExit };

// Parses argv and TPNODE_* variables (and --config). Prints help, version and errors itself;
// on kExit, `exit_code` says how to leave (0 after --help, 2 on an error).
ParseOutcome parseTopoCommandLine(int argc, char** argv, TopoOptions& options, int& exit_code);

// The flags tptopo adds to tpnode's cluster flags, in --help order (docs/tptopo.md's table):
// tpnode's --json and --log-level, then every Scope::kTptopo row.
std::vector<const settings::Setting*> tptopoOwnSettings();

// The TopoOptions member of every Scope::kTptopo row.
std::span<const node::FieldBinding<TopoOptions>> topoFieldBindings();

}  // namespace tpnode::tptopo
