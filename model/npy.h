// Minimal .npy (format 1.0) for float32 C-order arrays: the logits dumps, the reference cases
// and tensor reads (npyBytes, any shape). readNpy also takes float16 (converted to float; the
// quantized models' reference logits). Reading treats the file as hostile (Error(kInvalidData)
// on any mismatch).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tpnode::model {

struct NpyMatrix {
  int64_t rows = 0, cols = 0;
  std::vector<float> data;
  const float* row(int64_t r) const { return data.data() + r * cols; }
};

void writeNpy(const std::string& path, const float* data, int64_t rows, int64_t cols);
// The bytes of a float32 C-order .npy of any shape (n elements = the shape's product).
std::string npyBytes(const float* data, const std::vector<uint64_t>& shape);
NpyMatrix readNpy(const std::string& path);

}  // namespace tpnode::model
