// copy_bandwidth: measures memory bandwidth on this machine with `threads` threads, each
// copying its own buffer (memcpy, counted as bytes read) and reading it (the widest loads, 1-8
// streams, with and without prefetch: tools/mem_bandwidth.h). The decode bound of a model is
// weight bytes per token / read bandwidth. --mib 0 (the default) takes 4 x the last-level cache
// in all (at least 512 MiB per thread), so the figures are DRAM's.
//
//   copy_bandwidth [--mib 0] [--threads 1] [--reps 5]   prints the best of reps, in GB/s, as JSON
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>

#include "tools/mem_bandwidth.h"

int main(int argc, char** argv) {
  int mib = 0, threads = 1, reps = 5;
  CLI::App app{"copy_bandwidth: memcpy and read bandwidth"};
  app.add_option("--mib", mib, "MiB per thread (0: 4 x the last-level cache in all, >= 512)")
      ->capture_default_str();
  app.add_option("--threads", threads)->capture_default_str();
  app.add_option("--reps", reps)->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const size_t llc = tpnode::tools::llcBytes();
  const size_t bytes =
      mib > 0 ? static_cast<size_t>(mib) << 20 : std::max<size_t>(size_t{512} << 20, 4 * llc);
  auto bw = tpnode::tools::measureMemBandwidth(bytes, threads, reps);
  std::printf(
      "{\"threads\": %d, \"mib_per_thread\": %zu, \"llc_mib\": %zu, \"copy_gbps\": %.2f, "
      "\"read_gbps\": %.2f, \"read_how\": \"%s\", \"sink\": %llu}\n",
      threads, bytes >> 20, llc >> 20, bw.copy_gbps, bw.read_gbps, bw.read_how.c_str(), bw.sink);
  return 0;
}
