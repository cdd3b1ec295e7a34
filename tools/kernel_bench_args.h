// What the kernel benchmarks (tools/kernel_bench, tools/kernel_bench_icount) share: their list
// arguments, kernel tables by name, and the process's CPU time.
#pragma once

#include <time.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "model/kernels/cpu/dot.h"

namespace tpnode::tools {

// The process's CPU seconds (all threads).
inline double cpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// "a,b,c" -> {"a", "b", "c"}.
inline std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i <= s.size();) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    out.push_back(s.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

// The kernel table named `s` (best, scalar, avx2, avx2vnni, avx512, amx); nullptr when this CPU
// lacks it. An unknown name is a usage error of --isas.
inline const model::kernels::DotKernels* parseIsa(const std::string& s) {
  namespace k = model::kernels;
  if (s == "best") return &k::bestKernels();
  if (s == "scalar") return &k::scalarKernels();
  if (s == "avx2") return k::avx2Kernels();
  if (s == "avx2vnni") return k::avx2VnniKernels();
  if (s == "avx512") return k::avx512Kernels();
  if (s == "amx") return k::avx512AmxKernels();
  throw CLI::ValidationError("--isas", "unknown kernel table " + s);
}

}  // namespace tpnode::tools
