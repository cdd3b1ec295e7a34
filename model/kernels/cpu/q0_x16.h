// Q8_0, Q4_0 and Q5_0 weights repacked at load time for the x86 kernels (Q8_0: AVX-512 VNNI only;
// Q4_0, Q5_0: AVX2 too, 8 rows per 256-bit vector): 16 rows per group, one block group per 32
// columns. The layout is private to the CPU kernels (never written to
// a file or sent anywhere); the values and the integer arithmetic are those of ggml's Q8_0 / Q4_0 /
// Q5_0.
//
// Per group and block, for rows r < 16 and 4-byte chunks c:
//   d[r]           the row's f16 block scale
//   Q8_0 qs[c][r]  bytes 4c..4c+3 of the row's qs (c < 8), each plus 128 (stored unsigned)
//   Q4_0 qs[c][r]  bytes 4c..4c+3 of the row's qs (c < 4): low nibbles are values 4c..4c+3,
//                  high nibbles values 16+4c..16+4c+3, both unsigned (value + 8)
//   Q5_0 qs[c][r]  as Q4_0 (the low 4 bits of value + 16), and
//        qh[r][c]  the 5th bits those nibbles lack: bits 0-3 for values 4c..4c+3, bits 4-7
//                  for values 16+4c..16+4c+3 (ggml's 32-bit qh regrouped by chunk)
//   Q5_1 as Q5_0 (values 0..31, no offset), and m[r] the row's f16 block min
// so one 64-byte load holds the same 4 columns of all 16 rows, and vpdpbusd against the
// matching 4 activation bytes (broadcast) accumulates all 16 rows at once, one row per lane.
// The unsigned offsets are taken out of the integer sums they start at, precomputed per
// activation row (q0X16Offsets): Q8_0 per 4-column chunk (its kernel keeps every chunk's sum apart,
// as llama.cpp's float lanes do), Q4_0 / Q5_0 per block. Q5_1 has no offset; its min term comes
// from its Q8_1 activations' own block sums (s = d x sum). A group takes exactly as many bytes as
// its 16 plain rows.
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/kernels/cpu/blocks.h"
#include "model/tensor_type.h"

namespace tpnode::model::kernels {

constexpr int kQ0Group = 16;  // rows per repacked group

struct BlockQ8_0x16 {
  uint16_t d[kQ0Group];
  uint8_t qs[8][kQ0Group][4];
};
static_assert(sizeof(BlockQ8_0x16) == kQ0Group * sizeof(BlockQ8_0));

struct BlockQ4_0x16 {
  uint16_t d[kQ0Group];
  uint8_t qs[4][kQ0Group][4];
};
static_assert(sizeof(BlockQ4_0x16) == kQ0Group * sizeof(BlockQ4_0));

struct BlockQ5_0x16 {
  uint16_t d[kQ0Group];
  uint8_t qh[kQ0Group][4];
  uint8_t qs[4][kQ0Group][4];
};
static_assert(sizeof(BlockQ5_0x16) == kQ0Group * sizeof(BlockQ5_0));

struct BlockQ5_1x16 {
  uint16_t d[kQ0Group];
  uint16_t m[kQ0Group];
  uint8_t qh[kQ0Group][4];
  uint8_t qs[4][kQ0Group][4];
};
static_assert(sizeof(BlockQ5_1x16) == kQ0Group * sizeof(BlockQ5_1));

// The kernels' names for the types of this layout (a compile-time TensorType).
enum class Q0Kind { kQ8_0, kQ4_0, kQ5_0, kQ5_1 };

// Bytes of one block group (16 rows x 32 columns) of a kind.
template <Q0Kind kKind>
constexpr size_t q0BlockBytes() {
  return kKind == Q0Kind::kQ8_0   ? sizeof(BlockQ8_0x16)
         : kKind == Q0Kind::kQ4_0 ? sizeof(BlockQ4_0x16)
         : kKind == Q0Kind::kQ5_0 ? sizeof(BlockQ5_0x16)
                                  : sizeof(BlockQ5_1x16);
}

// Q4_0 / Q5_0 / Q5_1: activation byte offset, within a 32-value block, of the values weight
// vector c (< 8) holds: vectors 0-3 the low nibbles of qs[c] (values 4c..4c+3), 4-7 the high
// nibbles of qs[c - 4] (values 16 + 4(c - 4)..).
constexpr int q0X16Col(int c) {
  return c < 4 ? 4 * c : 16 + 4 * (c - 4);
}

// True for the types this layout holds (Q8_0, Q4_0, Q5_0, Q5_1).
bool q0X16Type(TensorType type);

// Repacks `rows` (a multiple of 16) plain rows of `type` and `cols` columns from `src` (rows
// contiguous) into `dst` (the same size, not overlapping src).
void repackQ0x16(TensorType type, const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols);

// The inverse, byte for byte the file's rows. For tensor reads (model/tensor_read.cc).
void unpackQ0x16(TensorType type, const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols);

// The integer sums the x16 kernels of weight `type` start at, per Q8_0 activation row:
//   Q8_0  out[t * cols / 4 + 8 * b + c] = -128 x the sum of bytes 4c..4c+3 of block b of row t
//   Q4_0  out[t * cols / 32 + b]        = -8 x the sum of the 32 bytes of block b of row t
//   Q5_0  the same with -16
// for n_tok rows `stride` bytes apart. q0X16OffsetsPerRow: the values per row.
int64_t q0X16OffsetsPerRow(TensorType type, int64_t cols);
void q0X16Offsets(TensorType type, const uint8_t* acts, size_t stride, int64_t n_tok, int64_t cols,
                  int32_t* out);

}  // namespace tpnode::model::kernels
