// Q4_K weights repacked at load time for the x86 kernels (AVX-512 VNNI, and AVX2 with 8 rows per
// 256-bit vector): 16 rows per group, one BlockQ4Kx16 per 256 columns. The layout is private to the
// CPU kernels (never written to a file or sent anywhere); the values and the integer arithmetic are
// those of ggml's Q4_K.
//
// Per group and super-block, for rows r < 16, sub-blocks j < 8, pairs p < 4 (sub-blocks 2p
// and 2p + 1 share the 32 bytes qs[32p..32p+31] of a Q4_K block: low nibbles are 2p, high
// nibbles 2p + 1), 4-byte chunks c < 8 of those 32 bytes:
//   d[r], dmin[r]          the row's f16 super-block scales
//   scales[j][r]           6-bit scale of sub-block j, unpacked to a byte
//   mins[j / 2][r][j % 2]  6-bit min of sub-block j, unpacked; the two mins of a pair are
//                          adjacent so that one vpdpwssd lane holds (min 2q, min 2q + 1)
//   qs[p][c][r][k]         = Q4_K qs[32p + 4c + k] of row r (k < 4)
// so one 64-byte load holds the same 4 bytes of all 16 rows, and vpdpbusd against the
// matching 4 activation bytes (broadcast) accumulates all 16 rows at once, one row per lane.
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/kernels/cpu/blocks.h"

namespace tpnode::model::kernels {

constexpr int kQ4KGroup = 16;  // rows per repacked group

struct BlockQ4Kx16 {
  uint16_t d[kQ4KGroup];
  uint16_t dmin[kQ4KGroup];
  uint8_t scales[8][kQ4KGroup];
  uint8_t mins[4][kQ4KGroup][2];
  uint8_t qs[4][8][kQ4KGroup][4];
};
static_assert(sizeof(BlockQ4Kx16) == 64 + 128 + 128 + 2048);

// Bytes one row takes in the repacked layout (cols % 256 == 0).
constexpr size_t q4kX16RowBytes(int64_t cols) {
  return static_cast<size_t>(cols / kQKK) * sizeof(BlockQ4Kx16) / kQ4KGroup;
}

// Repacks `rows` (a multiple of 16) plain Q4_K rows of `cols` columns from `src` (rows
// contiguous) into `dst` (rows * q4kX16RowBytes(cols) bytes, not overlapping src).
void repackQ4Kx16(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols);

// The inverse: `rows` plain Q4_K rows (the file's bytes, 6-bit scales and mins packed back into
// ggml's 12-byte form) from the repacked `src`. For tensor reads (model/tensor_read.cc).
void unpackQ4Kx16(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols);

}  // namespace tpnode::model::kernels
