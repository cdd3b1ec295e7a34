// Memory bandwidth of this machine: `threads` threads each copy their own buffer (memcpy,
// counted as bytes read) and read it (sum of 64-bit words); the best of `reps` repetitions.
// Used by tools/copy_bandwidth and tools/tptopo. Allocates 2 x bytes_per_thread per thread.
#pragma once

#include <cstddef>

namespace tpnode::tools {

struct MemBandwidth {
  double copy_gbps = 0;  // 1e9 bytes per second
  double read_gbps = 0;
  unsigned long long sink = 0;  // keeps the read loop alive; meaningless
};

MemBandwidth measureMemBandwidth(size_t bytes_per_thread, int threads, int reps);

}  // namespace tpnode::tools
