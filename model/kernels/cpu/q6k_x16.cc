#include "model/kernels/cpu/q6k_x16.h"

#include <cstring>

#include "model/kernels/cpu/row_groups.h"

namespace tpnode::model::kernels {
namespace {

// One row's block moved into (to_group) or out of its place in the group's block.
void move(BlockQ6Kx16& g, int r, BlockQ6K& x, bool to_group) {
  auto copy = [to_group](uint8_t* group_bytes, uint8_t* row_bytes, size_t n) {
    if (to_group) {
      std::memcpy(group_bytes, row_bytes, n);
    } else {
      std::memcpy(row_bytes, group_bytes, n);
    }
  };
  copy(reinterpret_cast<uint8_t*>(&g.d[r]), reinterpret_cast<uint8_t*>(&x.d), 2);
  for (int p = 0; p < 8; ++p) {
    copy(reinterpret_cast<uint8_t*>(g.scales[p][r]), reinterpret_cast<uint8_t*>(x.scales + 2 * p),
         2);
  }
  for (int h = 0; h < 2; ++h) {
    for (int c = 0; c < 8; ++c) {
      copy(g.ql[h][c][r], x.ql + 64 * h + 4 * c, 4);
      copy(g.ql[h][8 + c][r], x.ql + 64 * h + 32 + 4 * c, 4);
      copy(g.qh[h][c][r], x.qh + 32 * h + 4 * c, 4);
    }
  }
}

// Value v (< 256) of a ggml Q6_K block, 0..63 (q + 32 of the signed value).
uint8_t q6kValue(const BlockQ6K& x, int v) {
  const int h = v / 128, i = v % 128;
  const uint8_t ql = x.ql[64 * h + i % 64];
  const int low = i < 64 ? ql & 0x0F : ql >> 4;
  const int top = (x.qh[32 * h + i % 32] >> (2 * (i / 32))) & 3;
  return static_cast<uint8_t>(low | top << 4);
}

// The row's block into (to_group) or out of its place in the linear group's block.
void moveLinear(BlockQ6Kx16Linear& g, int r, BlockQ6K& x, bool to_group) {
  if (to_group) {
    std::memcpy(&g.d[r], &x.d, 2);
    for (int p = 0; p < 8; ++p) std::memcpy(g.scales[p][r], x.scales + 2 * p, 2);
    for (int h = 0; h < 2; ++h) {
      for (int c = 0; c < 8; ++c) {
        for (int k = 0; k < 4; ++k) {
          const int v = 128 * h + 4 * c + k;
          const uint8_t f = q6kValue(x, v + 96);
          g.q[h][c][0][r][k] = static_cast<uint8_t>(q6kValue(x, v) | (f & 3) << 6);
          g.q[h][c][1][r][k] = static_cast<uint8_t>(q6kValue(x, v + 32) | (f >> 2 & 3) << 6);
          g.q[h][c][2][r][k] = static_cast<uint8_t>(q6kValue(x, v + 64) | (f >> 4) << 6);
        }
      }
    }
    return;
  }
  std::memcpy(&x.d, &g.d[r], 2);
  for (int p = 0; p < 8; ++p) std::memcpy(x.scales + 2 * p, g.scales[p][r], 2);
  std::memset(x.ql, 0, sizeof x.ql);
  std::memset(x.qh, 0, sizeof x.qh);
  for (int h = 0; h < 2; ++h) {
    for (int c = 0; c < 8; ++c) {
      for (int k = 0; k < 4; ++k) {
        const uint8_t b0 = g.q[h][c][0][r][k], b1 = g.q[h][c][1][r][k], b2 = g.q[h][c][2][r][k];
        const uint8_t vals[4] = {static_cast<uint8_t>(b0 & 63), static_cast<uint8_t>(b1 & 63),
                                 static_cast<uint8_t>(b2 & 63),
                                 static_cast<uint8_t>(b0 >> 6 | (b1 >> 6) << 2 | (b2 >> 6) << 4)};
        for (int j = 0; j < 4; ++j) {  // value 128h + i, i = 32j + 4c + k
          const int i = 32 * j + 4 * c + k;
          x.ql[64 * h + i % 64] |=
              static_cast<uint8_t>(i < 64 ? vals[j] & 0x0F : (vals[j] & 0x0F) << 4);
          x.qh[32 * h + i % 32] |= static_cast<uint8_t>((vals[j] >> 4) << (2 * (i / 32)));
        }
      }
    }
  }
}

}  // namespace

void repackQ6Kx16Linear(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols) {
  convertRowGroups<BlockQ6K, BlockQ6Kx16Linear, kQKK, kQ6KGroup, moveLinear>(src, dst, rows, cols,
                                                                             true);
}

void unpackQ6Kx16Linear(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols) {
  convertRowGroups<BlockQ6K, BlockQ6Kx16Linear, kQKK, kQ6KGroup, moveLinear>(src, dst, rows, cols,
                                                                             false);
}

void repackQ6Kx16(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols) {
  convertRowGroups<BlockQ6K, BlockQ6Kx16, kQKK, kQ6KGroup, move>(src, dst, rows, cols, true);
}

void unpackQ6Kx16(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols) {
  convertRowGroups<BlockQ6K, BlockQ6Kx16, kQKK, kQ6KGroup, move>(src, dst, rows, cols, false);
}

}  // namespace tpnode::model::kernels
