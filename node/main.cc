// tpnode: one process per host. Dispatches to the mode the flags ask for.
#include <malloc.h>

#include <cstdio>
#include <string>

#include <spdlog/spdlog.h>

#include "common/error.h"
#include "common/log.h"
#include "mesh/secret.h"
#include "node/modes.h"
#include "node/options.h"

namespace {

// glibc gives threads up to 8 malloc arenas per core, each keeping what its threads freed. A
// node's threads allocate little once running (buffers are reused), but short-lived threads
// (up to 64 mesh handshakes at once, e.g. during a flood of connections) would each take an
// arena and leave it holding memory; two arenas bound that on any machine (docs/benchmarks.md,
// "Hardening: memory under floods"). Before any thread starts.
void limitMallocArenas() {
#ifdef __GLIBC__
  mallopt(M_ARENA_MAX, 2);
#endif
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tpnode;
  limitMallocArenas();
  node::Options options;
  int exit_code = 0;
  switch (node::parseCommandLine(argc, argv, options, exit_code)) {
    case node::ParseResult::kExitOk:
      return 0;
    case node::ParseResult::kExitError:
      return exit_code == 0 ? 2 : exit_code;
    case node::ParseResult::kRun:
      break;
  }
  if (options.gen_secret) {
    try {
      mesh::writeNewClusterSecret(options.gen_secret_file);
      std::printf("wrote a 256-bit cluster secret to %s (mode 0600)\n",
                  options.gen_secret_file.c_str());
      return 0;
    } catch (const Error& e) {
      std::fprintf(stderr, "tpnode gen-secret: %s\n", e.what());
      return 1;
    }
  }
  try {
    std::string tag = "n";  // (not "n" + to_string: GCC 12 -O3 warns -Wrestrict on that)
    tag += std::to_string(options.node_id);
    initLogging(node::enumName(options.log_level), tag);
    if (!options.model.empty()) return node::runCluster(options);
    if (options.model.empty() && !options.peers.empty()) return node::runMeshOnly(options);
    spdlog::error(
        "nothing to do: give --model (one process), --peers (mesh smoke test), or "
        "both (a cluster); see --help");
    return 2;
  } catch (const Error& e) {
    spdlog::error("{} ({})", e.what(), errorCodeName(e.code()));
    return 1;
  }
}
