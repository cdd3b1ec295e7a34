// Memory bandwidth of this machine: `threads` threads each copy their own buffer (memcpy,
// counted as bytes read) and read it; the best of `reps` repetitions.
// Used by tools/copy_bandwidth, tools/tptopo and tools/kernel_bench (its `read` layout).
// measureMemBandwidth allocates 2 x bytes_per_thread per thread, in the kind of memory tpnode keeps
// weights in (model::HostBuffer: transparent huge pages where the OS gives them).
//
// The read rate is what one core can pull in with the widest loads it has (AVX-512 where the
// CPU has it, else AVX2, else 64-bit words), reading its buffer as 1, 2, 4 or 8 independent
// streams (consecutive slices read side by side, each with its own accumulators), with and without
// software prefetch: the best of every variant and repetition, so it bounds what a kernel reading
// weights can reach (a decode kernel streams 16-row groups the same way). The buffer must be far
// larger than the last-level cache for the figure to be DRAM's (llcBytes()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tpnode::tools {

struct MemBandwidth {
  double copy_gbps = 0;  // 1e9 bytes per second
  double read_gbps = 0;
  std::string read_how;         // the best read variant, e.g. "avx512 x4 prefetch"
  unsigned long long sink = 0;  // keeps the read loops alive; meaningless
};

MemBandwidth measureMemBandwidth(size_t bytes_per_thread, int threads, int reps);

// Reads [p, p + bytes) once with the loop measureMemBandwidth times for `streams` (1, 2, 4 or 8
// consecutive slices side by side, no software prefetch) over the largest multiple of
// streams x 128 bytes, the rest one byte at a time; returns a value made from what it read,
// so that the loads stay (not a checksum: the vector readers fold only some lanes).
uint64_t readSlices(const uint8_t* p, size_t bytes, int streams);

// The last-level cache's size in bytes as the OS reports it (0 when unknown).
size_t llcBytes();

}  // namespace tpnode::tools
