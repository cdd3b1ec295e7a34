// Where the reference set lives (tests/data/reference/README.md): the models the build generates
// from tests/data/reference/models.txt into <build>/reference-models (target reference_models,
// a dependency of every test), and llama.cpp's recorded outputs on them in
// tests/data/reference/{prompts,cases}. Environment TPNODE_TEST_MODEL_DIR and TPNODE_SOURCE_DIR
// override the two (tests run from a bundle elsewhere, tools/gpu-check.sh).
#pragma once

#include <fstream>
#include <string>

#include "tests/support/test_env.h"

namespace tpnode::testing_support {

inline std::string referenceModelDir() {
  return testEnv("TPNODE_TEST_MODEL_DIR").value_or(TPNODE_TEST_MODEL_DIR);
}

// <model dir>/<stem>.gguf, e.g. referenceModel("llama-tiny-q8_0").
inline std::string referenceModel(const std::string& stem) {
  return referenceModelDir() + "/" + stem + ".gguf";
}

inline std::string referenceDataDir() {
  return testEnv("TPNODE_SOURCE_DIR").value_or(TPNODE_TEST_SOURCE_DIR) + "/tests/data/reference";
}

// The sha256 the build wrote beside a generated model (empty when missing).
inline std::string generatedModelSha256(const std::string& stem) {
  std::ifstream in(referenceModel(stem) + ".sha256");
  std::string sha;
  in >> sha;
  return sha;
}

// Empty when the generated model is the one llama.cpp was recorded on; otherwise why not.
inline std::string recordedModelMismatch(const std::string& stem, const std::string& recorded) {
  const std::string have = generatedModelSha256(stem);
  if (have == recorded) return {};
  return stem + ".gguf in " + referenceModelDir() + " has sha256 " +
         (have.empty() ? "<missing: build the target reference_models>" : have) +
         " but the recording in tests/data/reference/cases was made on " + recorded +
         ": the generator (tools/test_model.cc, test_vocab.cc) or models.txt changed; re-record "
         "with tools/record-reference.sh";
}

}  // namespace tpnode::testing_support
