// tptopo: the topology self-test (docs/tptopo.md). Runs the checks, prints the report (a table,
// or JSON with --json) on stdout, progress on stderr, and exits with the report's exit code.
#include <cstdio>

#include <spdlog/spdlog.h>

#include "common/error.h"
#include "common/log.h"
#include "tools/tptopo/report_json.h"
#include "tools/tptopo/report_table.h"
#include "tools/tptopo/run.h"
#include "tools/tptopo/topo_options.h"
#include "tools/tptopo/watchdog.h"

int main(int argc, char** argv) {
  using namespace tpnode;
  tptopo::TopoOptions options;
  int exit_code = 0;
  if (tptopo::parseTopoCommandLine(argc, argv, options, exit_code) == tptopo::ParseOutcome::kExit) {
    return exit_code;
  }
  try {
    initLogging(node::enumName(options.node.log_level), "n" + std::to_string(options.node.node_id));
  } catch (const Error& e) {
    std::fprintf(stderr, "tptopo: %s\n", e.what());
    return tptopo::kExitUsage;
  }
  const double limit =
      options.timeout_s > 0 ? options.timeout_s : options.node.connect_timeout_s + 300;
  tptopo::Watchdog watchdog{std::chrono::duration<double>(limit)};
  try {
    tptopo::Report report = tptopo::runTopo(options);
    const std::string out =
        options.node.json ? tptopo::toJson(report).dump(2) + "\n" : tptopo::formatReport(report);
    std::fputs(out.c_str(), stdout);
    std::fflush(stdout);
    return report.exit_code;
  } catch (const Error& e) {
    spdlog::error("{} ({})", e.what(), errorCodeName(e.code()));
    return e.code() == ErrorCode::kInvalidArgument ? tptopo::kExitUsage : tptopo::kExitInternal;
  } catch (const std::exception& e) {
    spdlog::error("tptopo: {}", e.what());
    return tptopo::kExitInternal;
  }
}
