// Q6_K weights repacked at load time for the x86 kernels: 16 rows per group, one block per 256
// columns, in the split arrangement (BlockQ6Kx16, the AVX-512 kernels) or the linear one
// (BlockQ6Kx16Linear below, the 256-bit tables). The layout is private to the CPU kernels (never
// written to a file or sent anywhere); the values and the integer arithmetic are those of ggml's
// Q6_K.
//
// ggml's Q6_K block: value v of half h (v = 128h + i) has its low 4 bits in ql[64h + i % 64]
// (low nibble for i < 64, high nibble for i >= 64) and its top 2 bits in qh[32h + i % 32]
// (bits 2 * (i / 32)); sub-block v / 16 has the int8 scale scales[v / 16]; value = q - 32.
// Per group and block, for rows r < 16, halves h < 2, 4-byte chunks c < 8:
//   d[r]                the row's f16 scale
//   scales[p][r][k]     scale of sub-block 2p + k (p < 8, k < 2): the two scales of a pair are
//                       adjacent, so one vpdpwssd lane holds both
//   ql[h][c][r]         ql bytes 64h + 4c..+3 (values 128h + 4c.. and 128h + 64 + 4c..)
//   ql[h][8 + c][r]     ql bytes 64h + 32 + 4c..+3 (values 128h + 32 + 4c.., 128h + 96 + 4c..)
//   qh[h][c][r]         qh bytes 32h + 4c..+3 (the top bits of all four)
// so one 64-byte load holds the same 4 columns of all 16 rows (one row per 32-bit lane).
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/kernels/cpu/blocks.h"

namespace tpnode::model::kernels {

constexpr int kQ6KGroup = 16;  // rows per repacked group

struct BlockQ6Kx16 {
  uint16_t d[kQ6KGroup];
  int8_t scales[8][kQ6KGroup][2];
  uint8_t ql[2][16][kQ6KGroup][4];
  uint8_t qh[2][8][kQ6KGroup][4];
};
static_assert(sizeof(BlockQ6Kx16) == kQ6KGroup * sizeof(BlockQ6K));

// Repacks `rows` (a multiple of 16) plain Q6_K rows of `cols` columns (a multiple of 256) from
// `src` into `dst` (the same size, not overlapping src).
void repackQ6Kx16(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols);

// The inverse, byte for byte the file's rows. For tensor reads and embedding lookups.
void unpackQ6Kx16(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols);

// The linear arrangement of the same 16-row groups, for the 256-bit kernels
// (DotKernels::q6k_x16_linear, Matrix::q6k_linear): d and scales as BlockQ6Kx16, then per half
// h < 2 and 4-column chunk c < 8 three 64-byte vectors one after another, q[h][c][0..2][r][k]
// (rows r < 16, k < 4), holding the 6-bit values a, b, e, f of columns 128h + 4c + k,
// 128h + 32 + 4c + k, 128h + 64 + 4c + k and 128h + 96 + 4c + k of row r:
//   q[h][c][0] = a | (f & 3) << 6
//   q[h][c][1] = b | (f >> 2 & 3) << 6
//   q[h][c][2] = e | (f >> 4) << 6
// so a decode reads each block front to back, and a, b, e take one mask each and f three masks,
// three shifts and two ors (the split arrangement: 17 operations for the four).
struct BlockQ6Kx16Linear {
  uint16_t d[kQ6KGroup];
  int8_t scales[8][kQ6KGroup][2];
  uint8_t q[2][8][3][kQ6KGroup][4];
};
static_assert(sizeof(BlockQ6Kx16Linear) == sizeof(BlockQ6Kx16));

// repackQ6Kx16 / unpackQ6Kx16 for the linear arrangement.
void repackQ6Kx16Linear(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols);
void unpackQ6Kx16Linear(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols);

}  // namespace tpnode::model::kernels
