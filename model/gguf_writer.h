// GGUF writer (version 3) for test models and tools: collects metadata and tensors, then
// serialises them in the layout gguf.h describes. Single-threaded builder; not used at runtime.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/gguf.h"

namespace tpnode::model {

class GgufWriter {
 public:
  void setU32(const std::string& key, uint32_t v);
  void setI32(const std::string& key, int32_t v);
  void setU64(const std::string& key, uint64_t v);
  void setF32(const std::string& key, float v);
  void setBool(const std::string& key, bool v);
  void setString(const std::string& key, const std::string& v);
  void setStringArray(const std::string& key, const std::vector<std::string>& v);
  void setF32Array(const std::string& key, const std::vector<float>& v);
  void setI32Array(const std::string& key, const std::vector<int32_t>& v);
  // ne[0] is the row length. `data` must hold exactly the tensor's bytes for `type`.
  void addTensor(const std::string& name, TensorType type, std::vector<uint64_t> ne,
                 std::vector<uint8_t> data);
  void setAlignment(uint32_t alignment) { alignment_ = alignment; }

  std::vector<uint8_t> serialize() const;
  void writeFile(const std::string& path) const;  // Error(kIo) on failure

 private:
  struct Tensor {
    std::string name;
    TensorType type;
    std::vector<uint64_t> ne;
    std::vector<uint8_t> data;
  };
  void key(const std::string& k, GgufValueType t);
  std::vector<uint8_t> kv_;
  uint64_t n_kv_ = 0;
  std::vector<Tensor> tensors_;
  uint32_t alignment_ = 32;
};

}  // namespace tpnode::model
