// The loop every 16-row repack shares (q0_x16.cc, q6k_x16.cc): for each group of kRows plain rows
// and each block column, Move(group_block, r, plain_block, to_group) moves row r's block into
// (to_group) or out of the group's block. Plain rows are contiguous in the file's layout; groups
// of blocks are contiguous in the repacked one; both take the same bytes.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/check.h"

namespace tpnode::model::kernels {

template <typename Plain, typename Group, int kQK, int kRows,
          void (*Move)(Group&, int, Plain&, bool)>
void convertRowGroups(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols, bool to_group) {
  static_assert(sizeof(Group) == kRows * sizeof(Plain));
  TP_CHECK(rows % kRows == 0 && cols % kQK == 0, "{}-row layout of {} x {}", kRows, rows, cols);
  const int64_t nb = cols / kQK;
  const size_t row_bytes = static_cast<size_t>(nb) * sizeof(Plain);
  for (int64_t g = 0; g < rows / kRows; ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      const size_t group_at = static_cast<size_t>(g * nb + b) * sizeof(Group);
      Group o;
      if (!to_group) std::memcpy(&o, src + group_at, sizeof o);
      for (int r = 0; r < kRows; ++r) {
        const size_t plain_at =
            static_cast<size_t>(g * kRows + r) * row_bytes + static_cast<size_t>(b) * sizeof(Plain);
        Plain x;
        if (to_group) std::memcpy(&x, src + plain_at, sizeof x);
        Move(o, r, x, to_group);
        if (!to_group) std::memcpy(dst + plain_at, &x, sizeof x);
      }
      if (to_group) std::memcpy(dst + group_at, &o, sizeof o);
    }
  }
}

}  // namespace tpnode::model::kernels
