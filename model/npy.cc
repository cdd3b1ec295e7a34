#include "model/npy.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <regex>

#include "common/error.h"
#include "model/kernels/cpu/blocks.h"

namespace tpnode::model {

void writeNpy(const std::string& path, const float* data, int64_t rows, int64_t cols) {
  std::string header =
      fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {}), }}", rows, cols);
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) fail(ErrorCode::kIo, "cannot write '{}'", path);
  const uint8_t magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  uint16_t len = static_cast<uint16_t>(header.size());
  const uint8_t len_le[2] = {static_cast<uint8_t>(len), static_cast<uint8_t>(len >> 8)};
  size_t n = static_cast<size_t>(rows * cols);
  if (std::fwrite(magic, 1, 8, f.get()) != 8 || std::fwrite(len_le, 1, 2, f.get()) != 2 ||
      std::fwrite(header.data(), 1, header.size(), f.get()) != header.size() ||
      std::fwrite(data, 4, n, f.get()) != n) {
    fail(ErrorCode::kIo, "cannot write '{}'", path);
  }
}

std::string npyBytes(const float* data, const std::vector<uint64_t>& shape) {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  std::string dims =
      shape.size() == 1 ? fmt::format("{},", shape[0]) : fmt::format("{}", fmt::join(shape, ", "));
  std::string header =
      fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}), }}", dims);
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(reinterpret_cast<const char*>(data), n * 4);
  return out;
}

NpyMatrix readNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorCode::kIo, "cannot open '{}'", path);
  std::string b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (b.size() < 10 || std::memcmp(b.data(), "\x93NUMPY", 6) != 0 || b[6] != 1) {
    fail(ErrorCode::kInvalidData, "'{}' is not a version 1 .npy file", path);
  }
  size_t hlen = static_cast<uint8_t>(b[8]) | (static_cast<size_t>(static_cast<uint8_t>(b[9])) << 8);
  if (10 + hlen > b.size()) fail(ErrorCode::kInvalidData, "'{}': truncated header", path);
  std::string header = b.substr(10, hlen);
  std::smatch m;
  const bool f16 = header.find("'<f2'") != std::string::npos;
  if ((!f16 && header.find("'<f4'") == std::string::npos) ||
      header.find("False") == std::string::npos ||
      !std::regex_search(header, m, std::regex(R"(\((\d{1,9}), (\d{1,9})\))"))) {
    fail(ErrorCode::kInvalidData, "'{}': not a float32/float16 C-order 2-D array: {}", path,
         header);
  }
  NpyMatrix out;
  out.rows = std::stoll(m[1]);
  out.cols = std::stoll(m[2]);
  const size_t n = static_cast<size_t>(out.rows * out.cols), elem = f16 ? 2 : 4;
  if ((b.size() - 10 - hlen) / elem != n || (b.size() - 10 - hlen) % elem != 0) {
    fail(ErrorCode::kInvalidData, "'{}': size mismatch", path);
  }
  out.data.resize(n);
  const char* p = b.data() + 10 + hlen;
  if (f16) {
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      out.data[i] = kernels::fp16ToF32(h);
    }
  } else {
    std::memcpy(out.data.data(), p, n * 4);
  }
  return out;
}

}  // namespace tpnode::model
