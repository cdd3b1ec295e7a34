#include "model/kernels/cpu/q4k_x16.h"

#include <cstring>

#include "common/check.h"

namespace tpnode::model::kernels {

void repackQ4Kx16(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols) {
  TP_CHECK(rows % kQ4KGroup == 0 && cols % kQKK == 0, "Q4_K x16 repack of {} x {}", rows, cols);
  const int64_t nb = cols / kQKK;
  const size_t row_bytes = static_cast<size_t>(nb) * sizeof(BlockQ4K);
  for (int64_t g = 0; g < rows / kQ4KGroup; ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      BlockQ4Kx16 o;
      for (int r = 0; r < kQ4KGroup; ++r) {
        BlockQ4K x;
        std::memcpy(&x,
                    src + static_cast<size_t>(g * kQ4KGroup + r) * row_bytes +
                        static_cast<size_t>(b) * sizeof(BlockQ4K),
                    sizeof x);
        o.d[r] = x.d;
        o.dmin[r] = x.dmin;
        for (int j = 0; j < 8; ++j) {
          uint8_t sc, m;
          q4kScaleMin(j, x.scales, sc, m);
          o.scales[j][r] = sc;
          o.mins[j / 2][r][j % 2] = m;
        }
        for (int p = 0; p < 4; ++p) {
          for (int c = 0; c < 8; ++c) std::memcpy(o.qs[p][c][r], x.qs + 32 * p + 4 * c, 4);
        }
      }
      std::memcpy(dst + static_cast<size_t>(g * nb + b) * sizeof o, &o, sizeof o);
    }
  }
}

void unpackQ4Kx16(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols) {
  TP_CHECK(rows % kQ4KGroup == 0 && cols % kQKK == 0, "Q4_K x16 unpack of {} x {}", rows, cols);
  const int64_t nb = cols / kQKK;
  const size_t row_bytes = static_cast<size_t>(nb) * sizeof(BlockQ4K);
  for (int64_t g = 0; g < rows / kQ4KGroup; ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      BlockQ4Kx16 o;
      std::memcpy(&o, src + static_cast<size_t>(g * nb + b) * sizeof o, sizeof o);
      for (int r = 0; r < kQ4KGroup; ++r) {
        BlockQ4K x;
        x.d = o.d[r];
        x.dmin = o.dmin[r];
        uint8_t sc[8], m[8];
        for (int j = 0; j < 8; ++j) {
          sc[j] = o.scales[j][r];
          m[j] = o.mins[j / 2][r][j % 2];
        }
        // ggml's 6-bit packing (the inverse of q4kScaleMin): bytes 0-3 hold scales 0-3 and the
        // top 2 bits of scales 4-7, bytes 4-7 mins 0-3 and the top 2 bits of mins 4-7, bytes
        // 8-11 the low 4 bits of scale and min 4-7.
        for (int i = 0; i < 4; ++i) {
          x.scales[i] = static_cast<uint8_t>((sc[i] & 63) | ((sc[i + 4] >> 4) << 6));
          x.scales[i + 4] = static_cast<uint8_t>((m[i] & 63) | ((m[i + 4] >> 4) << 6));
          x.scales[i + 8] = static_cast<uint8_t>((sc[i + 4] & 15) | ((m[i + 4] & 15) << 4));
        }
        for (int p = 0; p < 4; ++p) {
          for (int c = 0; c < 8; ++c) std::memcpy(x.qs + 32 * p + 4 * c, o.qs[p][c][r], 4);
        }
        std::memcpy(dst + static_cast<size_t>(g * kQ4KGroup + r) * row_bytes +
                        static_cast<size_t>(b) * sizeof(BlockQ4K),
                    &x, sizeof x);
      }
    }
  }
}

}  // namespace tpnode::model::kernels
