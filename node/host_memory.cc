#include "node/host_memory.h"

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

}  // namespace tpnode::node
