// copy_bandwidth: measures memory bandwidth on this machine with `threads` threads, each
// copying its own buffer (memcpy, counted as bytes read) and reading it (sum of 64-bit words).
// The decode bound of a model is weight bytes per token / read bandwidth.
//
//   copy_bandwidth [--mib 512] [--threads 1] [--reps 5]   prints the best of reps, in GB/s
#include <CLI/CLI.hpp>

#include <cstdio>

#include "tools/mem_bandwidth.h"

int main(int argc, char** argv) {
  int mib = 512, threads = 1, reps = 5;
  CLI::App app{"copy_bandwidth: memcpy and read bandwidth"};
  app.add_option("--mib", mib, "MiB per thread")->capture_default_str();
  app.add_option("--threads", threads)->capture_default_str();
  app.add_option("--reps", reps)->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  auto bw = tpnode::tools::measureMemBandwidth(static_cast<size_t>(mib) << 20, threads, reps);
  std::printf("{\"threads\": %d, \"copy_gbps\": %.2f, \"read_gbps\": %.2f, \"sink\": %llu}\n",
              threads, bw.copy_gbps, bw.read_gbps, bw.sink);
  return 0;
}
