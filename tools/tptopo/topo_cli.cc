#include <cstdio>

#include <CLI/CLI.hpp>

#include "common/error.h"
#include "common/version.h"
#include "node/cli_flags.h"
#include "tools/tptopo/report.h"
#include "tools/tptopo/topo_options.h"

namespace tpnode::tptopo {
namespace {

using Field = node::FieldBinding<TopoOptions>;

// Every Scope::kTptopo row of common/settings_table.cc, in its order.
const Field kFields[] = {
    {"mem-mib", &TopoOptions::mem_mib},
    {"mem-reps", &TopoOptions::mem_reps},
    {"skip-gpu", &TopoOptions::skip_gpu},
    {"gpu-mib", &TopoOptions::gpu_mib},
    {"rtt-rounds", &TopoOptions::rtt_rounds},
    {"bw-mib", &TopoOptions::bw_mib},
    {"bw-rounds", &TopoOptions::bw_rounds},
    {"min-link-gbps", &TopoOptions::min_link_gbps},
    {"max-rtt-p99-us", &TopoOptions::max_rtt_p99_us},
    {"allreduce-iters", &TopoOptions::allreduce_iters},
    {"timeout", &TopoOptions::timeout_s},
    {"plan-model", &TopoOptions::plan_model},
    {"plan-parallel", &TopoOptions::plan_parallel},
};

// tpnode's rows tptopo takes as they are (bound to node::Options), shown under "Output".
constexpr std::string_view kOutputFlags[] = {"json", "log-level"};

}  // namespace

std::vector<const settings::Setting*> tptopoOwnSettings() {
  std::vector<const settings::Setting*> rows;
  for (std::string_view flag : kOutputFlags) rows.push_back(settings::findFlag(flag));
  for (const settings::Setting& s : settings::settingsTable()) {
    if (s.scope == settings::Scope::kTptopo) rows.push_back(&s);
  }
  return rows;
}

std::span<const node::FieldBinding<TopoOptions>> topoFieldBindings() {
  return kFields;
}

ParseOutcome parseTopoCommandLine(int argc, char** argv, TopoOptions& t, int& exit_code) {
  CLI::App app{
      "tptopo: is this host, and this cluster, fit to run tpnode? Checks the CPU, CUDA devices "
      "(P2P, NCCL, staging), and with --peers every mesh link and a hierarchical all-reduce.\n\n"
      "Examples:\n"
      "  tptopo                                               # this host\n"
      "  tptopo --node-id 0 --peers a:9600,b:9600 --tp 2      # on host a (and 1 on host b)\n"
      "  tptopo --config configs/cluster.yaml --node-id 1 --json\n\n"
      "Exit codes: 0 ok, 1 a check failed, 2 usage, 3 internal error or timeout, 4 degraded.",
      "tptopo"};
  app.set_version_flag("--version",
                       std::string("tptopo ") + TPNODE_VERSION + " (" + TPNODE_GIT_COMMIT + ")");
  app.get_formatter()->column_width(34);
  node::FlagTexts node_texts;  // -> t.node (node/settings_binding.h)
  node::FlagTexts own_texts;   // -> the TopoOptions members of kFields
  node::addClusterFlags(app, node_texts);
  for (std::string_view flag : kOutputFlags) {
    node::addSettingFlag(app, *settings::findFlag(flag), node_texts)->group("Output");
  }
  node::addSettingFlags(app, settings::settingsTable(), settings::Scope::kTptopo, own_texts);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    exit_code = app.exit(e);
    if (exit_code != 0) exit_code = kExitUsage;
    return ParseOutcome::kExit;
  }
  try {
    node::applyFlagTexts(app, node_texts, t.node);
    node::applyFields(app, own_texts, settings::settingsTable(), topoFieldBindings(), t);
    node::finishClusterFlags(app, t.node);
  } catch (const Error& e) {
    std::fprintf(stderr, "tptopo: %s\n", e.what());
    exit_code = kExitUsage;
    return ParseOutcome::kExit;
  }
  return ParseOutcome::kRun;
}

}  // namespace tpnode::tptopo
