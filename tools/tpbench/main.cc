// tpbench: benchmarks of tpnode's layers. Subcommands:
//   tpbench allreduce --node-id N --peers a:p,b:q --tp T --sizes 4K,16K,16M --dtype f32 [--json]
// Flags: tools/tpbench/bench_flags.h (docs/tpbench.md).
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "common/error.h"
#include "common/log.h"
#include "tools/tpbench/allreduce_bench.h"
#include "tools/tpbench/bench_flags.h"

int main(int argc, char** argv) {
  using namespace tpnode;
  CLI::App app{"tpbench: tpnode benchmarks"};
  app.require_subcommand(1);
  auto* ar = app.add_subcommand("allreduce", "global all-reduce latency and bandwidth");
  node::FlagTexts texts;
  tools::addBenchFlags(*ar, texts);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    tools::BenchFlags flags;
    tools::applyBenchFlags(*ar, texts, flags);
    initLogging(flags.log_level, "n" + std::to_string(flags.node_id));
    return tools::runAllReduceBench(tools::toBenchOptions(flags));
  } catch (const Error& e) {
    std::fprintf(stderr, "tpbench: %s (%s)\n", e.what(),
                 std::string(errorCodeName(e.code())).c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tpbench: %s\n", e.what());
    return 1;
  }
}
