// Locates ../shared (the reference set): env TPNODE_SHARED_DIR, else TPNODE_SOURCE_DIR/../shared,
// else TPNODE_SOURCE_DIR/../../shared (git worktrees one level deeper). Empty when not found.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace tpnode::testing_support {

inline std::string sharedDir() {
  namespace fs = std::filesystem;
  const char* env = std::getenv("TPNODE_SHARED_DIR");
  if (env && fs::exists(fs::path(env) / "reference" / "models")) return env;
  const char* src = std::getenv("TPNODE_SOURCE_DIR");
#ifdef TPNODE_TEST_SOURCE_DIR
  if (!src) src = TPNODE_TEST_SOURCE_DIR;
#endif
  fs::path base = src ? fs::path(src) : fs::current_path();
  for (const fs::path& p : {base / ".." / "shared", base / ".." / ".." / "shared"}) {
    if (fs::exists(p / "reference" / "models")) return fs::canonical(p).string();
  }
  return {};
}

}  // namespace tpnode::testing_support
