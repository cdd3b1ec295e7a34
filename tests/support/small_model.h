// A small model for tests of the serving and cluster machinery (not of numerics): a Q8_0 llama
// of dim 64, 4 heads / 2 kv heads, ffn 128, vocabulary 512, written by the repository's own
// deterministic generator (tools/test_model.h).
#pragma once

#include <string>

#include "tools/test_model.h"

namespace tpnode::testing_support {

inline void writeSmallTestModel(const std::string& path) {
  tools::TestModelShape shape;
  shape.dim = 64;
  shape.heads = 4;
  shape.kv_heads = 2;
  shape.ffn = 128;
  shape.vocab = 512;
  shape.type = model::TensorType::kQ8_0;
  tools::writeTestModel(shape, path);
}

}  // namespace tpnode::testing_support
