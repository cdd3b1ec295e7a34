// Where tools/fetch-model.sh keeps the default model (gemma-3-270m Q4_K_M): the cache folder
// ${TPNODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tpnode}/models, as the scripts compute it.
// TPNODE_GEMMA_MODEL names another file. Tests that need it skip, saying so, when it is absent.
#pragma once

#include <cstdlib>
#include <string>

namespace tpnode::testing_support {

inline std::string tpnodeCacheDir() {
  if (const char* c = std::getenv("TPNODE_CACHE")) return c;
  if (const char* x = std::getenv("XDG_CACHE_HOME")) return std::string(x) + "/tpnode";
  const char* home = std::getenv("HOME");
  return home ? std::string(home) + "/.cache/tpnode" : std::string();
}

inline std::string defaultModelPath() {
  if (const char* p = std::getenv("TPNODE_GEMMA_MODEL")) return p;
  return tpnodeCacheDir() + "/models/gemma-3-270m-q4_k_m.gguf";
}

}  // namespace tpnode::testing_support
