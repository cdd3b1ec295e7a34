// One size's result of a peer all-reduce benchmark (gloo_allreduce.cc, mpi_allreduce.cc), as
// the JSON object `tpbench allreduce --json` prints: p50/p99 of the per-call times, algbw and
// busbw (nccl-tests: busbw = algbw * 2(n-1)/n). Header-only: the script compiles each peer
// alone, with its own compiler driver.
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

// Appends {"bytes":..,"p50_us":..,...} to `json` (an array opened with "["), sorting `us`.
inline void appendAllReduceResult(std::string& json, size_t bytes, std::vector<double>& us,
                                  int ranks) {
  std::sort(us.begin(), us.end());
  const double p50 = us[us.size() / 2], p99 = us[std::min(us.size() - 1, us.size() * 99 / 100)];
  const double algbw = bytes / (p50 * 1e-6) / 1e9;
  char line[256];
  std::snprintf(line, sizeof line,
                "%s{\"bytes\":%zu,\"p50_us\":%.2f,\"p99_us\":%.2f,\"algbw_GBps\":%.4f,"
                "\"busbw_GBps\":%.4f}",
                json.size() > 1 ? "," : "", bytes, p50, p99, algbw,
                algbw * 2.0 * (ranks - 1) / ranks);
  json += line;
}
