// ggml tensor types as GGUF stores them: the numeric ids, block sizes and block byte sizes
// (ggml/src/ggml.c type_traits). Types tpnode computes with are marked `supported`; the others
// are known only so that a file holding them parses and is refused later with a clear message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tpnode::model {

enum class TensorType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
};

struct TensorTypeInfo {
  std::string_view name;
  uint32_t block_size;  // elements per block
  uint32_t type_size;   // bytes per block
  bool supported;       // tpnode has kernels for it
};

// nullopt for an id that is not a ggml type this reader knows.
std::optional<TensorTypeInfo> tensorTypeInfo(uint32_t id);
const TensorTypeInfo& tensorTypeInfo(TensorType type);  // type must be a known enumerator
std::string_view tensorTypeName(TensorType type);

// Bytes of one row of n elements; n must be a multiple of the block size (TP_CHECK).
size_t rowBytes(TensorType type, uint64_t n);

}  // namespace tpnode::model
