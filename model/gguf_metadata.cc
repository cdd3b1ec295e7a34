// GgufMetadata accessors: typed lookups with errors that name the key.
#include <fmt/format.h>

#include "common/error.h"
#include "model/gguf.h"

namespace tpnode::model {
namespace {

[[noreturn]] void wrongType(std::string_view key, GgufValueType have, std::string_view want) {
  fail(ErrorCode::kInvalidData, "GGUF key '{}' has type {}, expected {}", key,
       ggufValueTypeName(have), want);
}

bool isIntegerType(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
      return true;
    default:
      return false;
  }
}

}  // namespace

std::string_view ggufValueTypeName(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
      return "uint8";
    case GgufValueType::kInt8:
      return "int8";
    case GgufValueType::kUint16:
      return "uint16";
    case GgufValueType::kInt16:
      return "int16";
    case GgufValueType::kUint32:
      return "uint32";
    case GgufValueType::kInt32:
      return "int32";
    case GgufValueType::kFloat32:
      return "float32";
    case GgufValueType::kBool:
      return "bool";
    case GgufValueType::kString:
      return "string";
    case GgufValueType::kArray:
      return "array";
    case GgufValueType::kUint64:
      return "uint64";
    case GgufValueType::kInt64:
      return "int64";
    case GgufValueType::kFloat64:
      return "float64";
  }
  return "?";
}

size_t GgufArray::size() const {
  return ints.size() + floats.size() + strings.size();
}

std::string GgufTensorInfo::shapeString() const {
  std::string s = "[";
  for (uint32_t d = 0; d < n_dims; ++d) s += fmt::format("{}{}", d ? ", " : "", ne[d]);
  return s + "]";
}

void GgufMetadata::set(std::string key, GgufValue value) {
  auto [it, inserted] = values_.emplace(std::move(key), std::move(value));
  if (!inserted) fail(ErrorCode::kInvalidData, "GGUF key '{}' appears twice", it->first);
}

bool GgufMetadata::has(std::string_view key) const {
  return find(key) != nullptr;
}

const GgufValue* GgufMetadata::find(std::string_view key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

static const GgufValue& required(const GgufMetadata& m, std::string_view key) {
  const GgufValue* v = m.find(key);
  if (!v) fail(ErrorCode::kInvalidData, "GGUF key '{}' is missing", key);
  return *v;
}

std::string GgufMetadata::getString(std::string_view key) const {
  const GgufValue& v = required(*this, key);
  if (v.type != GgufValueType::kString) wrongType(key, v.type, "string");
  return std::get<std::string>(v.value);
}

int64_t GgufMetadata::getInt(std::string_view key) const {
  const GgufValue& v = required(*this, key);
  if (auto* u = std::get_if<uint64_t>(&v.value)) {
    if (*u > uint64_t{INT64_MAX})
      fail(ErrorCode::kInvalidData, "GGUF key '{}' = {} is too large", key, *u);
    return static_cast<int64_t>(*u);
  }
  if (auto* s = std::get_if<int64_t>(&v.value)) return *s;
  wrongType(key, v.type, "an integer");
}

double GgufMetadata::getFloat(std::string_view key) const {
  const GgufValue& v = required(*this, key);
  if (auto* d = std::get_if<double>(&v.value)) return *d;
  if (isIntegerType(v.type)) return static_cast<double>(getInt(key));
  wrongType(key, v.type, "a number");
}

bool GgufMetadata::getBool(std::string_view key) const {
  const GgufValue& v = required(*this, key);
  if (auto* b = std::get_if<bool>(&v.value)) return *b;
  wrongType(key, v.type, "bool");
}

const GgufArray& GgufMetadata::getArray(std::string_view key) const {
  const GgufValue& v = required(*this, key);
  if (auto* a = std::get_if<GgufArray>(&v.value)) return *a;
  wrongType(key, v.type, "array");
}

const std::vector<std::string>& GgufMetadata::getStringArray(std::string_view key) const {
  const GgufArray& a = getArray(key);
  if (a.elem_type != GgufValueType::kString) {
    fail(ErrorCode::kInvalidData, "GGUF key '{}' is an array of {}, expected strings", key,
         ggufValueTypeName(a.elem_type));
  }
  return a.strings;
}

std::vector<float> GgufMetadata::getFloatArray(std::string_view key) const {
  const GgufArray& a = getArray(key);
  if (a.elem_type == GgufValueType::kString || a.elem_type == GgufValueType::kBool) {
    fail(ErrorCode::kInvalidData, "GGUF key '{}' is an array of {}, expected numbers", key,
         ggufValueTypeName(a.elem_type));
  }
  std::vector<float> out;
  out.reserve(a.size());
  for (double d : a.floats) out.push_back(static_cast<float>(d));
  for (int64_t i : a.ints) out.push_back(static_cast<float>(i));
  return out;
}

std::vector<int64_t> GgufMetadata::getIntArray(std::string_view key) const {
  const GgufArray& a = getArray(key);
  if (!isIntegerType(a.elem_type)) {
    fail(ErrorCode::kInvalidData, "GGUF key '{}' is an array of {}, expected integers", key,
         ggufValueTypeName(a.elem_type));
  }
  return a.ints;
}

std::string GgufMetadata::getStringOr(std::string_view key, std::string fallback) const {
  return has(key) ? getString(key) : fallback;
}
int64_t GgufMetadata::getIntOr(std::string_view key, int64_t fallback) const {
  return has(key) ? getInt(key) : fallback;
}
double GgufMetadata::getFloatOr(std::string_view key, double fallback) const {
  return has(key) ? getFloat(key) : fallback;
}
bool GgufMetadata::getBoolOr(std::string_view key, bool fallback) const {
  return has(key) ? getBool(key) : fallback;
}

const GgufTensorInfo* GgufMetadata::findTensor(std::string_view name) const {
  for (const GgufTensorInfo& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const GgufTensorInfo& GgufMetadata::tensor(std::string_view name) const {
  const GgufTensorInfo* t = findTensor(name);
  if (!t) fail(ErrorCode::kInvalidData, "GGUF tensor '{}' is missing", name);
  return *t;
}

}  // namespace tpnode::model
