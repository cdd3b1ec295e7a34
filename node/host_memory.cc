#include "node/host_memory.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

namespace tpnode::node {

uint64_t availableHostMemory() {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string key, unit;
    uint64_t value = 0;
    if (!(fields >> key >> value >> unit)) continue;
    if (key == "MemAvailable:" && unit == "kB") return value * 1024;
  }
  return 0;
}

uint64_t offeredHostMemory(double limit_gib) {
  if (limit_gib > 0) return std::max<uint64_t>(1, static_cast<uint64_t>(limit_gib * 1073741824.0));
  return availableHostMemory();
}

}  // namespace tpnode::node
