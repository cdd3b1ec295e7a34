// Reads a whole file into a string (tests only: an unreadable file gives "").
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace tpnode::testing_support {

inline std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace tpnode::testing_support
