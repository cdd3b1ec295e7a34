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

}  // namespace

void repackQ6Kx16(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols) {
  convertRowGroups<BlockQ6K, BlockQ6Kx16, kQKK, kQ6KGroup, move>(src, dst, rows, cols, true);
}

void unpackQ6Kx16(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols) {
  convertRowGroups<BlockQ6K, BlockQ6Kx16, kQKK, kQ6KGroup, move>(src, dst, rows, cols, false);
}

}  // namespace tpnode::model::kernels
