#include "model/gguf_writer.h"

#include <cstdio>
#include <cstring>
#include <memory>

#include "common/byte_order.h"
#include "common/check.h"
#include "common/error.h"

namespace tpnode::model {
namespace {

void put32(std::vector<uint8_t>& b, uint32_t v) {
  uint8_t t[4];
  storeLE32(t, v);
  b.insert(b.end(), t, t + 4);
}
void put64(std::vector<uint8_t>& b, uint64_t v) {
  uint8_t t[8];
  storeLE64(t, v);
  b.insert(b.end(), t, t + 8);
}
void putF32(std::vector<uint8_t>& b, float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  put32(b, bits);
}
void putString(std::vector<uint8_t>& b, const std::string& s) {
  put64(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}

}  // namespace

void GgufWriter::key(const std::string& k, GgufValueType t) {
  putString(kv_, k);
  put32(kv_, static_cast<uint32_t>(t));
  ++n_kv_;
}

void GgufWriter::setU32(const std::string& k, uint32_t v) {
  key(k, GgufValueType::kUint32);
  put32(kv_, v);
}
void GgufWriter::setI32(const std::string& k, int32_t v) {
  key(k, GgufValueType::kInt32);
  put32(kv_, static_cast<uint32_t>(v));
}
void GgufWriter::setU64(const std::string& k, uint64_t v) {
  key(k, GgufValueType::kUint64);
  put64(kv_, v);
}
void GgufWriter::setF32(const std::string& k, float v) {
  key(k, GgufValueType::kFloat32);
  putF32(kv_, v);
}
void GgufWriter::setBool(const std::string& k, bool v) {
  key(k, GgufValueType::kBool);
  kv_.push_back(v ? 1 : 0);
}
void GgufWriter::setString(const std::string& k, const std::string& v) {
  key(k, GgufValueType::kString);
  putString(kv_, v);
}
void GgufWriter::setStringArray(const std::string& k, const std::vector<std::string>& v) {
  key(k, GgufValueType::kArray);
  put32(kv_, static_cast<uint32_t>(GgufValueType::kString));
  put64(kv_, v.size());
  for (const auto& s : v) putString(kv_, s);
}
void GgufWriter::setF32Array(const std::string& k, const std::vector<float>& v) {
  key(k, GgufValueType::kArray);
  put32(kv_, static_cast<uint32_t>(GgufValueType::kFloat32));
  put64(kv_, v.size());
  for (float f : v) putF32(kv_, f);
}
void GgufWriter::setI32Array(const std::string& k, const std::vector<int32_t>& v) {
  key(k, GgufValueType::kArray);
  put32(kv_, static_cast<uint32_t>(GgufValueType::kInt32));
  put64(kv_, v.size());
  for (int32_t i : v) put32(kv_, static_cast<uint32_t>(i));
}

void GgufWriter::addTensor(const std::string& name, TensorType type, std::vector<uint64_t> ne,
                           std::vector<uint8_t> data) {
  TP_CHECK(!ne.empty() && ne.size() <= 4);
  uint64_t rows = 1;
  for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
  TP_CHECK(data.size() == rowBytes(type, ne[0]) * rows, "tensor {} data size", name);
  tensors_.push_back({name, type, std::move(ne), std::move(data)});
}

std::vector<uint8_t> GgufWriter::serialize() const {
  std::vector<uint8_t> b = {'G', 'G', 'U', 'F'};
  put32(b, 3);
  put64(b, tensors_.size());
  bool custom_alignment = alignment_ != 32;
  put64(b, n_kv_ + (custom_alignment ? 1 : 0));
  b.insert(b.end(), kv_.begin(), kv_.end());
  if (custom_alignment) {
    putString(b, "general.alignment");
    put32(b, static_cast<uint32_t>(GgufValueType::kUint32));
    put32(b, alignment_);
  }
  auto align = [&](uint64_t x) { return (x + alignment_ - 1) / alignment_ * alignment_; };
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    putString(b, t.name);
    put32(b, static_cast<uint32_t>(t.ne.size()));
    for (uint64_t n : t.ne) put64(b, n);
    put32(b, static_cast<uint32_t>(t.type));
    put64(b, offset);
    offset = align(offset + t.data.size());
  }
  b.resize(align(b.size()), 0);
  for (const Tensor& t : tensors_) {
    b.insert(b.end(), t.data.begin(), t.data.end());
    b.resize(align(b.size()), 0);
  }
  return b;
}

void GgufWriter::writeFile(const std::string& path) const {
  std::vector<uint8_t> b = serialize();
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f || std::fwrite(b.data(), 1, b.size(), f.get()) != b.size()) {
    fail(ErrorCode::kIo, "cannot write '{}'", path);
  }
}

}  // namespace tpnode::model
