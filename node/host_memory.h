// The memory this host can still give a process: MemAvailable of /proc/meminfo (Linux), in
// bytes; 0 when it cannot be read (then nothing is checked against it). Any thread.
#pragma once

#include <cstdint>

namespace tpnode::node {

uint64_t availableHostMemory();

}  // namespace tpnode::node
