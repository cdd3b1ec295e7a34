#include "model/tensor_type.h"

#include <array>

#include "common/check.h"

namespace tpnode::model {
namespace {

struct Entry {
  uint32_t id;
  TensorTypeInfo info;
};

constexpr std::array<Entry, 20> kTypes{{
    {0, {"F32", 1, 4, true}},       {1, {"F16", 1, 2, true}},
    {2, {"Q4_0", 32, 18, true}},    {3, {"Q4_1", 32, 20, false}},
    {6, {"Q5_0", 32, 22, true}},    {7, {"Q5_1", 32, 24, true}},
    {8, {"Q8_0", 32, 34, true}},    {9, {"Q8_1", 32, 36, false}},
    {10, {"Q2_K", 256, 84, false}}, {11, {"Q3_K", 256, 110, false}},
    {12, {"Q4_K", 256, 144, true}}, {13, {"Q5_K", 256, 176, false}},
    {14, {"Q6_K", 256, 210, true}}, {15, {"Q8_K", 256, 292, false}},
    {24, {"I8", 1, 1, false}},      {25, {"I16", 1, 2, false}},
    {26, {"I32", 1, 4, false}},     {27, {"I64", 1, 8, false}},
    {28, {"F64", 1, 8, false}},     {30, {"BF16", 1, 2, true}},
}};

}  // namespace

std::optional<TensorTypeInfo> tensorTypeInfo(uint32_t id) {
  for (const Entry& e : kTypes) {
    if (e.id == id) return e.info;
  }
  return std::nullopt;
}

const TensorTypeInfo& tensorTypeInfo(TensorType type) {
  for (const Entry& e : kTypes) {
    if (e.id == static_cast<uint32_t>(type)) return e.info;
  }
  TP_CHECK(false, "unknown tensor type {}", static_cast<uint32_t>(type));
  __builtin_unreachable();
}

std::string_view tensorTypeName(TensorType type) {
  return tensorTypeInfo(type).name;
}

size_t rowBytes(TensorType type, uint64_t n) {
  const TensorTypeInfo& info = tensorTypeInfo(type);
  TP_CHECK(n % info.block_size == 0, "{} elements is not a whole number of {} blocks", n,
           info.name);
  return static_cast<size_t>(n / info.block_size * info.type_size);
}

}  // namespace tpnode::model
