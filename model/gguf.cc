#include "model/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>

#include "common/byte_order.h"
#include "common/error.h"

namespace tpnode::model {
namespace {

constexpr uint64_t kMaxDims = 4;
constexpr uint64_t kMaxStringBytes = uint64_t{1} << 30;

// A bounds-checked cursor over the file bytes. Every read names what it reads for the error.
class Cursor {
 public:
  explicit Cursor(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }

  const uint8_t* take(uint64_t n, std::string_view what) {
    if (n > remaining()) {
      fail(ErrorCode::kInvalidData, "GGUF truncated: {} needs {} bytes at offset {}, file has {}",
           what, n, pos_, bytes_.size());
    }
    const uint8_t* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }
  uint8_t u8(std::string_view what) { return *take(1, what); }
  uint16_t u16(std::string_view what) { return loadLE16(take(2, what)); }
  uint32_t u32(std::string_view what) { return loadLE32(take(4, what)); }
  uint64_t u64(std::string_view what) { return loadLE64(take(8, what)); }
  std::string string(std::string_view what) {
    uint64_t n = u64(what);
    if (n > kMaxStringBytes)
      fail(ErrorCode::kInvalidData, "GGUF {}: string length {} too large", what, n);
    const uint8_t* p = take(n, what);
    return std::string(reinterpret_cast<const char*>(p), n);
  }

 private:
  std::span<const uint8_t> bytes_;
  uint64_t pos_ = 0;
};

// Smallest encoded size of one value of `type` (for count sanity checks before allocating).
uint64_t minEncodedSize(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
    case GgufValueType::kString:
      return 8;
    case GgufValueType::kArray:
      return 12;
  }
  return 1;
}

GgufValueType readValueType(Cursor& c, std::string_view key) {
  uint32_t t = c.u32(key);
  if (t > static_cast<uint32_t>(GgufValueType::kFloat64)) {
    fail(ErrorCode::kInvalidData, "GGUF key '{}': unknown value type {}", key, t);
  }
  return static_cast<GgufValueType>(t);
}

// Reads one scalar; integers come back widened, floats as double.
GgufValue readScalar(Cursor& c, GgufValueType type, std::string_view key) {
  GgufValue v;
  v.type = type;
  switch (type) {
    case GgufValueType::kUint8:
      v.value = uint64_t{c.u8(key)};
      break;
    case GgufValueType::kInt8:
      v.value = int64_t{static_cast<int8_t>(c.u8(key))};
      break;
    case GgufValueType::kUint16:
      v.value = uint64_t{c.u16(key)};
      break;
    case GgufValueType::kInt16:
      v.value = int64_t{static_cast<int16_t>(c.u16(key))};
      break;
    case GgufValueType::kUint32:
      v.value = uint64_t{c.u32(key)};
      break;
    case GgufValueType::kInt32:
      v.value = int64_t{static_cast<int32_t>(c.u32(key))};
      break;
    case GgufValueType::kUint64:
      v.value = c.u64(key);
      break;
    case GgufValueType::kInt64:
      v.value = static_cast<int64_t>(c.u64(key));
      break;
    case GgufValueType::kFloat32: {
      uint32_t bits = c.u32(key);
      float f;
      std::memcpy(&f, &bits, 4);
      v.value = double{f};
      break;
    }
    case GgufValueType::kFloat64: {
      uint64_t bits = c.u64(key);
      double d;
      std::memcpy(&d, &bits, 8);
      v.value = d;
      break;
    }
    case GgufValueType::kBool: {
      uint8_t b = c.u8(key);
      if (b > 1) fail(ErrorCode::kInvalidData, "GGUF key '{}': bool value {}", key, b);
      v.value = b == 1;
      break;
    }
    case GgufValueType::kString:
      v.value = c.string(key);
      break;
    case GgufValueType::kArray:
      fail(ErrorCode::kInvalidData, "GGUF key '{}': nested arrays are not supported", key);
  }
  return v;
}

GgufArray readArray(Cursor& c, std::string_view key) {
  GgufArray a;
  a.elem_type = readValueType(c, key);
  if (a.elem_type == GgufValueType::kArray) {
    fail(ErrorCode::kInvalidData, "GGUF key '{}': nested arrays are not supported", key);
  }
  uint64_t n = c.u64(key);
  if (n > c.remaining() / minEncodedSize(a.elem_type)) {
    fail(ErrorCode::kInvalidData, "GGUF key '{}': array of {} {} does not fit in the file", key, n,
         ggufValueTypeName(a.elem_type));
  }
  for (uint64_t i = 0; i < n; ++i) {
    GgufValue v = readScalar(c, a.elem_type, key);
    if (auto* u = std::get_if<uint64_t>(&v.value)) {
      a.ints.push_back(static_cast<int64_t>(*u));
    } else if (auto* s = std::get_if<int64_t>(&v.value)) {
      a.ints.push_back(*s);
    } else if (auto* d = std::get_if<double>(&v.value)) {
      a.floats.push_back(*d);
    } else if (auto* b = std::get_if<bool>(&v.value)) {
      a.ints.push_back(*b ? 1 : 0);
    } else {
      a.strings.push_back(std::move(std::get<std::string>(v.value)));
    }
  }
  return a;
}

uint64_t checkedMul(uint64_t a, uint64_t b, std::string_view tensor) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) {
    fail(ErrorCode::kInvalidData, "GGUF tensor '{}': size overflows", tensor);
  }
  return r;
}

GgufTensorInfo readTensorInfo(Cursor& c) {
  GgufTensorInfo t;
  t.name = c.string("tensor name");
  const std::string& name = t.name;
  t.n_dims = c.u32(name);
  if (t.n_dims == 0 || t.n_dims > kMaxDims) {
    fail(ErrorCode::kInvalidData, "GGUF tensor '{}': {} dimensions (1..{} allowed)", name, t.n_dims,
         kMaxDims);
  }
  for (uint32_t d = 0; d < t.n_dims; ++d) {
    t.ne[d] = c.u64(name);
    if (t.ne[d] == 0 || t.ne[d] > uint64_t{std::numeric_limits<int64_t>::max()}) {
      fail(ErrorCode::kInvalidData, "GGUF tensor '{}': dimension {} is {}", name, d, t.ne[d]);
    }
  }
  uint32_t type = c.u32(name);
  auto info = tensorTypeInfo(type);
  if (!info) fail(ErrorCode::kInvalidData, "GGUF tensor '{}': unknown ggml type {}", name, type);
  t.type = static_cast<TensorType>(type);
  if (t.ne[0] % info->block_size != 0) {
    fail(ErrorCode::kInvalidData,
         "GGUF tensor '{}': row of {} is not a multiple of the {} block {}", name, t.ne[0],
         info->name, info->block_size);
  }
  uint64_t bytes = checkedMul(t.ne[0] / info->block_size, info->type_size, name);
  for (int d = 1; d < 4; ++d) bytes = checkedMul(bytes, t.ne[d], name);
  t.n_bytes = bytes;
  t.offset = c.u64(name);  // relative to the data section for now
  return t;
}

void readKeyValues(Cursor& c, uint64_t n_kv, GgufMetadata& m) {
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.string("metadata key");
    GgufValueType type = readValueType(c, key);
    GgufValue v;
    if (type == GgufValueType::kArray) {
      v.type = type;
      v.value = readArray(c, key);
    } else {
      v = readScalar(c, type, key);
    }
    m.set(std::move(key), std::move(v));
  }
}

uint64_t readAlignment(const GgufMetadata& m) {
  const GgufValue* v = m.find("general.alignment");
  if (!v) return 32;
  if (v->type != GgufValueType::kUint32) {
    fail(ErrorCode::kInvalidData, "GGUF key 'general.alignment' has type {}, expected uint32",
         ggufValueTypeName(v->type));
  }
  uint64_t a = std::get<uint64_t>(v->value);
  if (a == 0 || (a & (a - 1)) != 0) {
    fail(ErrorCode::kInvalidData, "GGUF key 'general.alignment' is {}, not a power of two", a);
  }
  return a;
}

// Places every tensor: aligned, inside the file, no two overlapping.
void placeTensors(GgufMetadata& m, uint64_t file_size) {
  std::vector<const GgufTensorInfo*> order;
  for (GgufTensorInfo& t : m.tensors) {
    if (t.offset % m.alignment != 0) {
      fail(ErrorCode::kInvalidData, "GGUF tensor '{}': offset {} is not aligned to {}", t.name,
           t.offset, m.alignment);
    }
    uint64_t start, end;
    if (__builtin_add_overflow(t.offset, m.data_offset, &start) ||
        __builtin_add_overflow(start, t.n_bytes, &end) || end > file_size) {
      fail(ErrorCode::kInvalidData,
           "GGUF tensor '{}': data [{} + {}, {} bytes] lies outside the file of {} bytes", t.name,
           m.data_offset, t.offset, t.n_bytes, file_size);
    }
    t.offset = start;
    order.push_back(&t);
  }
  std::sort(order.begin(), order.end(),
            [](const auto* a, const auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < order.size(); ++i) {
    if (order[i - 1]->offset + order[i - 1]->n_bytes > order[i]->offset) {
      fail(ErrorCode::kInvalidData, "GGUF tensors '{}' and '{}' overlap", order[i - 1]->name,
           order[i]->name);
    }
  }
}

}  // namespace

GgufMetadata parseGguf(std::span<const uint8_t> bytes) {
  Cursor c(bytes);
  const uint8_t* magic = c.take(4, "magic");
  if (std::memcmp(magic, "GGUF", 4) != 0) {
    fail(ErrorCode::kInvalidData,
         "not a GGUF file: a GGUF file starts with the 4 bytes \"GGUF\" (its magic), this one "
         "with {:02x} {:02x} {:02x} {:02x}",
         magic[0], magic[1], magic[2], magic[3]);
  }
  GgufMetadata m;
  m.version = c.u32("version");
  if (m.version != 2 && m.version != 3) {
    fail(ErrorCode::kInvalidData, "GGUF version {} is not supported (2 and 3 are)", m.version);
  }
  uint64_t n_tensors = c.u64("tensor count");
  uint64_t n_kv = c.u64("metadata count");
  if (n_kv > c.remaining() / 12) {
    fail(ErrorCode::kInvalidData, "GGUF metadata count {} does not fit in the file", n_kv);
  }
  readKeyValues(c, n_kv, m);
  if (n_tensors > c.remaining() / 24) {
    fail(ErrorCode::kInvalidData, "GGUF tensor count {} does not fit in the file", n_tensors);
  }
  m.alignment = readAlignment(m);
  std::set<std::string_view> names;
  m.tensors.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    m.tensors.push_back(readTensorInfo(c));
    if (!names.insert(m.tensors.back().name).second) {
      fail(ErrorCode::kInvalidData, "GGUF tensor '{}' appears twice", m.tensors.back().name);
    }
  }
  uint64_t pad = (m.alignment - c.pos() % m.alignment) % m.alignment;
  m.data_offset = c.pos() + pad;
  if (m.data_offset > bytes.size() && !m.tensors.empty()) {
    fail(ErrorCode::kInvalidData, "GGUF truncated: data section starts at {}, file has {} bytes",
         m.data_offset, bytes.size());
  }
  placeTensors(m, bytes.size());
  return m;
}

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(ErrorCode::kIo, "cannot open model '{}': {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size <= 0) {
    ::close(fd);
    fail(ErrorCode::kInvalidData, "model '{}' is empty or cannot be read", path);
  }
  void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) fail(ErrorCode::kIo, "cannot map model '{}': {}", path, std::strerror(err));
  std::unique_ptr<GgufFile> f(new GgufFile());  // private constructor
  f->path_ = path;
  f->data_ = static_cast<const uint8_t*>(p);
  f->size_ = static_cast<size_t>(st.st_size);
  try {
    f->metadata_ = parseGguf(f->bytes());
  } catch (const Error& e) {
    fail(e.code(), "model '{}': {}", path, e.what());
  }
  return f;
}

GgufFile::~GgufFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

void GgufFile::releaseResidentPages() const {
  // Read-only MAP_PRIVATE pages are never copied on write, so dropping them loses nothing.
  if (data_) ::madvise(const_cast<uint8_t*>(data_), size_, MADV_DONTNEED);
}

std::span<const uint8_t> GgufFile::tensorData(const GgufTensorInfo& info) const {
  return {data_ + info.offset, static_cast<size_t>(info.n_bytes)};
}

}  // namespace tpnode::model
