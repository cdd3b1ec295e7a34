// The split Q8_0 layout (layout.cuh kLayoutQ8Split) and its packer, in plain C++ so the host
// test checks it: int8 quants [rows][cols], then at q8ScaleOffset(rows, cols) (a multiple of
// 256 bytes) the f16 scales [rows][cols / 32], each little-endian as in the GGUF block.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tpnode::model::cuda {

#if defined(__CUDACC__)
__host__ __device__
#endif
    inline size_t
    q8ScaleOffset(int64_t rows, int64_t cols) {
  return (static_cast<size_t>(rows) * static_cast<size_t>(cols) + 255) / 256 * 256;
}

inline size_t q8SplitBytes(int64_t rows, int64_t cols) {
  return q8ScaleOffset(rows, cols) + static_cast<size_t>(rows) * static_cast<size_t>(cols / 32) * 2;
}

// src: `rows` GGUF Q8_0 rows of `cols` values (34-byte blocks), row r at src + r * row_bytes.
// out: q8SplitBytes(rows, cols) bytes (the padding between quants and scales is zeroed).
inline void packQ8Split(const uint8_t* src, size_t row_bytes, int64_t rows, int64_t cols,
                        uint8_t* out) {
  const auto nr = static_cast<size_t>(rows), nc = static_cast<size_t>(cols);
  const size_t blocks = nc / 32, scale_at = q8ScaleOffset(rows, cols);
  std::memset(out + nr * nc, 0, scale_at - nr * nc);
  for (size_t r = 0; r < nr; ++r) {
    const uint8_t* row = src + r * row_bytes;
    for (size_t b = 0; b < blocks; ++b) {
      std::memcpy(out + r * nc + b * 32, row + b * 34 + 2, 32);
      std::memcpy(out + scale_at + (r * blocks + b) * 2, row + b * 34, 2);
    }
  }
}

}  // namespace tpnode::model::cuda
