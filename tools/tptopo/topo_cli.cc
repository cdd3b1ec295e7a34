#include <cstdio>

#include <CLI/CLI.hpp>

#include "common/error.h"
#include "common/version.h"
#include "node/cli_flags.h"
#include "tools/tptopo/report.h"
#include "tools/tptopo/topo_options.h"

namespace tpnode::tptopo {

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
  node::FlagTexts texts;
  node::Options& o = t.node;
  node::addClusterFlags(app, texts);
  auto flag = [&app](const std::string& name, auto& value, const std::string& help) {
    return node::addFlag(app, name, value, help)->group("Measuring");
  };
  app.add_flag("--json", t.json, "Print one JSON object (docs/tptopo.md) instead of tables")
      ->envname("TPNODE_JSON")
      ->group("Output");
  node::addFlag(app, "log-level", t.log_level, "trace, debug, info, warn, error")->group("Output");
  flag("mem-mib", t.mem_mib, "Memory bandwidth: MiB per thread")->check(CLI::Range(1, 4096));
  flag("mem-reps", t.mem_reps, "Memory bandwidth: repetitions (best counts)")
      ->check(CLI::Range(1, 100));
  app.add_flag("--skip-gpu", t.skip_gpu, "Do not touch CUDA devices")
      ->envname("TPNODE_SKIP_GPU")
      ->group("Measuring");
  flag("gpu-mib", t.gpu_mib, "GPU checks: MiB per P2P, staging and NCCL transfer")
      ->check(CLI::Range(1, 4096));
  flag("rtt-rounds", t.rtt_rounds, "Links: 64-byte round trips per link")
      ->check(CLI::Range(1, 100000));
  flag("bw-mib", t.bw_mib, "Links: MiB per bandwidth message")->check(CLI::Range(1, 256));
  flag("bw-rounds", t.bw_rounds, "Links: bandwidth messages per direction")
      ->check(CLI::Range(1, 1000));
  flag("min-link-gbps", t.min_link_gbps, "Links: below this many GB/s a link is degraded")
      ->check(CLI::Range(0.0, 1e6));
  flag("max-rtt-p99-us", t.max_rtt_p99_us, "Links: above this p99 round trip a link is degraded")
      ->check(CLI::Range(0.0, 1e9));
  flag("allreduce-iters", t.allreduce_iters, "All-reduce benchmark iterations per size")
      ->check(CLI::Range(1, 100000));
  flag("timeout", t.timeout_s,
       "Give up after this many seconds (exit 3); 0 = --connect-timeout + 300")
      ->check(CLI::Range(0.0, 1e6));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    exit_code = app.exit(e);
    if (exit_code != 0) exit_code = kExitUsage;
    return ParseOutcome::kExit;
  }
  try {
    node::applyFlagTexts(app, texts, o);
    node::finishClusterFlags(app, o);
  } catch (const Error& e) {
    std::fprintf(stderr, "tptopo: %s\n", e.what());
    exit_code = kExitUsage;
    return ParseOutcome::kExit;
  }
  return ParseOutcome::kRun;
}

}  // namespace tpnode::tptopo
