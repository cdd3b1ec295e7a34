// GGUF reader (versions 2 and 3): the header, every metadata value type, the tensor infos and
// the tensor data offsets, as ggml's gguf.cpp writes them (all little-endian):
//
//   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
//   n_kv x (string key | u32 value type | value)          string = u64 length + bytes
//   n_tensors x (string name | u32 n_dims | n_dims x u64 ne | u32 ggml type | u64 offset)
//   padding to general.alignment (default 32) | tensor data (offsets relative to here)
//
// Contract
// - The bytes are hostile. parseGguf checks every length, count, type, offset and size
//   (overflow-safe) against the buffer before use; malformed input is Error(kInvalidData)
//   naming the key or tensor, never an abort. It copies what it keeps (metadata, infos).
// - GgufFile maps the file read-only once; tensorData() returns views into that mapping,
//   valid while the GgufFile lives. Nothing here is thread-affine; a parsed GgufFile is
//   immutable and may be read from many threads.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "model/tensor_type.h"

namespace tpnode::model {

enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

std::string_view ggufValueTypeName(GgufValueType type);

// An array value. Integers (signed or unsigned, any width) are held in `ints` (a u64 above
// INT64_MAX is kept bit-cast), floats in `floats`, bools in `ints` as 0/1, strings in `strings`.
struct GgufArray {
  GgufValueType elem_type = GgufValueType::kUint8;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
  size_t size() const;
};

struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  std::variant<uint64_t, int64_t, double, bool, std::string, GgufArray> value;
};

struct GgufTensorInfo {
  std::string name;
  TensorType type = TensorType::kF32;
  uint32_t n_dims = 0;
  uint64_t ne[4] = {1, 1, 1, 1};  // ne[0] is the row length (contiguous), as in ggml
  uint64_t offset = 0;            // from the start of the file (data offset included)
  uint64_t n_bytes = 0;
  uint64_t elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  uint64_t rows() const { return ne[1] * ne[2] * ne[3]; }
  std::string shapeString() const;  // "[256, 1024]"
};

// The parsed header. Typed getters throw Error(kInvalidData) naming the key when it is
// missing or has an incompatible type; the *Or variants return the fallback when missing.
class GgufMetadata {
 public:
  uint32_t version = 0;
  uint64_t alignment = 32;
  uint64_t data_offset = 0;
  std::vector<GgufTensorInfo> tensors;  // file order

  bool has(std::string_view key) const;
  const GgufValue* find(std::string_view key) const;
  std::string getString(std::string_view key) const;
  int64_t getInt(std::string_view key) const;   // any integer type
  double getFloat(std::string_view key) const;  // float32/64 or any integer type
  bool getBool(std::string_view key) const;
  const GgufArray& getArray(std::string_view key) const;
  const std::vector<std::string>& getStringArray(std::string_view key) const;
  std::vector<float> getFloatArray(std::string_view key) const;  // numeric arrays
  std::vector<int64_t> getIntArray(std::string_view key) const;  // integer arrays
  std::string getStringOr(std::string_view key, std::string fallback) const;
  int64_t getIntOr(std::string_view key, int64_t fallback) const;
  double getFloatOr(std::string_view key, double fallback) const;
  bool getBoolOr(std::string_view key, bool fallback) const;

  const GgufTensorInfo* findTensor(std::string_view name) const;
  const GgufTensorInfo& tensor(std::string_view name) const;  // kInvalidData when missing
  const std::map<std::string, GgufValue, std::less<>>& values() const { return values_; }

  void set(std::string key, GgufValue value);  // used by the parser (rejects duplicates)

 private:
  std::map<std::string, GgufValue, std::less<>> values_;
};

// Parses a whole GGUF file held in `bytes` (header and data). Throws Error(kInvalidData).
GgufMetadata parseGguf(std::span<const uint8_t> bytes);

// A GGUF file mapped read-only.
class GgufFile {
 public:
  // Throws Error(kIo) when the file cannot be opened or mapped, kInvalidData when malformed.
  static std::unique_ptr<GgufFile> open(const std::string& path);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  const GgufMetadata& metadata() const { return metadata_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  std::span<const uint8_t> tensorData(const GgufTensorInfo& info) const;

  // Unmaps the file's pages from this process (madvise MADV_DONTNEED) once the ranks hold their
  // own copies of the weights, so that resident memory counts those copies and not the file a
  // second time. The mapping and every span into it stay valid: a later read maps the pages
  // again from the page cache (or the file). Advisory: a failure changes nothing.
  void releaseResidentPages() const;

 private:
  GgufFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  GgufMetadata metadata_;
};

}  // namespace tpnode::model
