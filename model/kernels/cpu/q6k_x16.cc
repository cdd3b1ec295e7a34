#include "model/kernels/cpu/q6k_x16.h"

#include <cstring>

#include "common/check.h"

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

void convert(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols, bool to_group) {
  TP_CHECK(rows % kQ6KGroup == 0 && cols % kQKK == 0, "Q6_K x16 layout of {} x {}", rows, cols);
  const int64_t nb = cols / kQKK;
  const size_t row_bytes = static_cast<size_t>(nb) * sizeof(BlockQ6K);
  for (int64_t g = 0; g < rows / kQ6KGroup; ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      const size_t group_at = static_cast<size_t>(g * nb + b) * sizeof(BlockQ6Kx16);
      BlockQ6Kx16 o;
      if (!to_group) std::memcpy(&o, src + group_at, sizeof o);
      for (int r = 0; r < kQ6KGroup; ++r) {
        const size_t plain_at = static_cast<size_t>(g * kQ6KGroup + r) * row_bytes +
                                static_cast<size_t>(b) * sizeof(BlockQ6K);
        BlockQ6K x;
        if (to_group) std::memcpy(&x, src + plain_at, sizeof x);
        move(o, r, x, to_group);
        if (!to_group) std::memcpy(dst + plain_at, &x, sizeof x);
      }
      if (to_group) std::memcpy(dst + group_at, &o, sizeof o);
    }
  }
}

}  // namespace

void repackQ6Kx16(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols) {
  convert(src, dst, rows, cols, true);
}

void unpackQ6Kx16(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols) {
  convert(src, dst, rows, cols, false);
}

}  // namespace tpnode::model::kernels
