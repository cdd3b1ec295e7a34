// Where tools/fetch-model.sh keeps the default model (gemma-3-270m Q4_K_M): the cache folder
// ${TPNODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tpnode}/models, as the scripts compute it.
// TPNODE_GEMMA_MODEL names another file. Tests that need it skip, saying so, when it is absent.
#pragma once

#include <string>

#include "tests/support/test_env.h"

namespace tpnode::testing_support {

inline std::string tpnodeCacheDir() {
  if (auto c = testEnv("TPNODE_CACHE")) return *c;
  if (auto x = testEnv("XDG_CACHE_HOME")) return *x + "/tpnode";
  const auto home = testEnv("HOME");
  return home ? *home + "/.cache/tpnode" : std::string();
}

inline std::string defaultModelPath() {
  if (auto p = testEnv("TPNODE_GEMMA_MODEL")) return *p;
  return tpnodeCacheDir() + "/models/gemma-3-270m-q4_k_m.gguf";
}

}  // namespace tpnode::testing_support
