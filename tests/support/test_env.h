// The test harness's environment: the one place tests read environment variables, as
// common/settings.cc is for the product (tools/ci.d/05-settings-getenv.sh allows getenv in
// those two files only). Tests never read the product's TPNODE_* settings here; they set them
// (setenv) and let the product read them through settings::envValue().
//
// Contract
// - testEnv(name) is the value of `name`, or nullopt when it is unset or empty (as the
//   settings table and the scripts' ${VAR:-default} treat it).
// - `name` must be one of kTestEnvVariables; another name is a bug in the test
//   (std::logic_error), so this list stays the complete list of what the tests read:
//     TPNODE_BIN             the tpnode executable. tests/test_main.cc sets it from the CMake
//                            target (TPNODE_TEST_BIN) unless ctest's ENVIRONMENT or the caller
//                            already did.
//     TPNODE_SOURCE_DIR      the repository. tests/test_main.cc sets it (TPNODE_TEST_SOURCE_DIR)
//                            unless the caller did (tools/gpu-check.sh).
//     TPNODE_TEST_MODEL_DIR  the generated reference models; the caller may set it
//                            (tools/gpu-check.sh), else the build's (TPNODE_TEST_MODEL_DIR).
//     TPTOPO_BIN             the tptopo executable; the caller may set it, else the build's
//                            (TPTOPO_TEST_BIN, tests/tools/CMakeLists.txt).
//     TPNODE_TEST_SEED       replays mesh_multiprocess_test's start order; set by hand.
//     TPNODE_PARITY_VERBOSE  reference_parity_test prints every row's difference; set by hand.
//     TPNODE_CACHE, XDG_CACHE_HOME, HOME, TPNODE_GEMMA_MODEL
//                            where tools/fetch-model.sh keeps the default model
//                            (tests/support/model_cache.h); the user's environment.
//     FAKE_CUDA_DEVICES      the device count of the emulated CUDA runtime (default 2)
//                            (tests/collectives/cuda/emulated); set by hand.
//     TPNODE_REDIS_SERVER    the redis-server the Redis tests start; the caller may set it
//                            (tools/gpu-check.sh), else the one CMake found
//                            (tests/node/redis/redis_server.h).
// - Reads the process environment: not safe against a concurrent setenv() in the same test.
#pragma once

#include <algorithm>
#include <array>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tpnode::testing_support {

inline constexpr std::array<std::string_view, 12> kTestEnvVariables = {
    "TPNODE_BIN",         "TPNODE_SOURCE_DIR", "TPNODE_TEST_MODEL_DIR",
    "TPTOPO_BIN",         "TPNODE_TEST_SEED",  "TPNODE_PARITY_VERBOSE",
    "TPNODE_CACHE",       "XDG_CACHE_HOME",    "HOME",
    "TPNODE_GEMMA_MODEL", "FAKE_CUDA_DEVICES", "TPNODE_REDIS_SERVER"};

inline std::optional<std::string> testEnv(std::string_view name) {
  if (std::find(kTestEnvVariables.begin(), kTestEnvVariables.end(), name) ==
      kTestEnvVariables.end()) {
    throw std::logic_error("tests/support/test_env.h does not list " + std::string(name));
  }
  const char* v = std::getenv(std::string(name).c_str());
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

}  // namespace tpnode::testing_support
