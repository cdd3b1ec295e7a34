#include "model/kernels/cpu/q0_x16.h"

#include <cstring>

#include "common/check.h"
#include "model/kernels/cpu/row_groups.h"

namespace tpnode::model::kernels {
namespace {

// Moves one block of one row between the plain form and its place in the group's block.
// `to_group` true: plain -> group; false: group -> plain.
void moveQ8_0(BlockQ8_0x16& g, int r, BlockQ8_0& x, bool to_group) {
  if (to_group) {
    g.d[r] = x.d;
    for (int c = 0; c < 8; ++c) {
      for (int k = 0; k < 4; ++k) g.qs[c][r][k] = static_cast<uint8_t>(x.qs[4 * c + k] ^ 0x80);
    }
  } else {
    x.d = g.d[r];
    for (int c = 0; c < 8; ++c) {
      for (int k = 0; k < 4; ++k) x.qs[4 * c + k] = static_cast<int8_t>(g.qs[c][r][k] ^ 0x80);
    }
  }
}

void moveQ4_0(BlockQ4_0x16& g, int r, BlockQ4_0& x, bool to_group) {
  if (to_group) {
    g.d[r] = x.d;
    for (int c = 0; c < 4; ++c) std::memcpy(g.qs[c][r], x.qs + 4 * c, 4);
  } else {
    x.d = g.d[r];
    for (int c = 0; c < 4; ++c) std::memcpy(x.qs + 4 * c, g.qs[c][r], 4);
  }
}

// ggml's qh: bit j is the 5th bit of value j (j < 32). Group byte c: bits 4c..4c+3 of qh in
// bits 0-3, bits 16+4c..16+4c+3 in bits 4-7.
void moveQ5_0(BlockQ5_0x16& g, int r, BlockQ5_0& x, bool to_group) {
  if (to_group) {
    g.d[r] = x.d;
    uint32_t qh;
    std::memcpy(&qh, x.qh, 4);
    for (int c = 0; c < 4; ++c) {
      g.qh[r][c] =
          static_cast<uint8_t>(((qh >> (4 * c)) & 0xF) | (((qh >> (16 + 4 * c)) & 0xF) << 4));
      std::memcpy(g.qs[c][r], x.qs + 4 * c, 4);
    }
  } else {
    x.d = g.d[r];
    uint32_t qh = 0;
    for (int c = 0; c < 4; ++c) {
      qh |= static_cast<uint32_t>(g.qh[r][c] & 0xF) << (4 * c);
      qh |= static_cast<uint32_t>(g.qh[r][c] >> 4) << (16 + 4 * c);
      std::memcpy(x.qs + 4 * c, g.qs[c][r], 4);
    }
    std::memcpy(x.qh, &qh, 4);
  }
}

void moveQ5_1(BlockQ5_1x16& g, int r, BlockQ5_1& x, bool to_group) {
  BlockQ5_0 x0;
  BlockQ5_0x16 g0;
  if (to_group) {
    g.m[r] = x.m;
    x0.d = x.d;
    std::memcpy(x0.qh, x.qh, 4);
    std::memcpy(x0.qs, x.qs, 16);
    moveQ5_0(g0, r, x0, true);
    g.d[r] = g0.d[r];
    std::memcpy(g.qh[r], g0.qh[r], 4);
    for (int c = 0; c < 4; ++c) std::memcpy(g.qs[c][r], g0.qs[c][r], 4);
  } else {
    x.m = g.m[r];
    g0.d[r] = g.d[r];
    std::memcpy(g0.qh[r], g.qh[r], 4);
    for (int c = 0; c < 4; ++c) std::memcpy(g0.qs[c][r], g.qs[c][r], 4);
    moveQ5_0(g0, r, x0, false);
    x.d = x0.d;
    std::memcpy(x.qh, x0.qh, 4);
    std::memcpy(x.qs, x0.qs, 16);
  }
}

void convertAny(TensorType type, const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols,
                bool to_group) {
  switch (type) {
    case TensorType::kQ8_0:
      return convertRowGroups<BlockQ8_0, BlockQ8_0x16, kQK8_0, kQ0Group, moveQ8_0>(src, dst, rows,
                                                                                   cols, to_group);
    case TensorType::kQ4_0:
      return convertRowGroups<BlockQ4_0, BlockQ4_0x16, kQK4_0, kQ0Group, moveQ4_0>(src, dst, rows,
                                                                                   cols, to_group);
    case TensorType::kQ5_0:
      return convertRowGroups<BlockQ5_0, BlockQ5_0x16, 32, kQ0Group, moveQ5_0>(src, dst, rows, cols,
                                                                               to_group);
    case TensorType::kQ5_1:
      return convertRowGroups<BlockQ5_1, BlockQ5_1x16, 32, kQ0Group, moveQ5_1>(src, dst, rows, cols,
                                                                               to_group);
    default:
      TP_CHECK(false, "no x16 layout for {}", tensorTypeName(type));
  }
}

}  // namespace

bool q0X16Type(TensorType type) {
  return type == TensorType::kQ8_0 || type == TensorType::kQ4_0 || type == TensorType::kQ5_0 ||
         type == TensorType::kQ5_1;
}

void repackQ0x16(TensorType type, const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols) {
  convertAny(type, src, dst, rows, cols, true);
}

void unpackQ0x16(TensorType type, const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols) {
  convertAny(type, src, dst, rows, cols, false);
}

int64_t q0X16OffsetsPerRow(TensorType type, int64_t cols) {
  return type == TensorType::kQ8_0 ? cols / 4 : cols / kQK8_0;
}

namespace {

// -offset x the sums of kSpan consecutive quants, over n_tok rows of nb Q8_0 blocks: the span a
// compile-time constant, so that the compiler unrolls and vectorizes the sums.
template <int kSpan>
void offsetSums(const uint8_t* acts, size_t stride, int64_t n_tok, int64_t nb, int offset,
                int32_t* out) {
  for (int64_t t = 0; t < n_tok; ++t) {
    const auto* y = reinterpret_cast<const BlockQ8_0*>(acts + static_cast<size_t>(t) * stride);
    for (int64_t b = 0; b < nb; ++b) {
      for (int i = 0; i < kQK8_0; i += kSpan) {
        int s = 0;
        for (int k = 0; k < kSpan; ++k) s += y[b].qs[i + k];
        *out++ = -offset * s;
      }
    }
  }
}

}  // namespace

void q0X16Offsets(TensorType type, const uint8_t* acts, size_t stride, int64_t n_tok, int64_t cols,
                  int32_t* out) {
  TP_CHECK(q0X16Type(type));
  const int64_t nb = cols / kQK8_0;
  if (type == TensorType::kQ8_0) {  // per 4-column chunk
    offsetSums<4>(acts, stride, n_tok, nb, 128, out);
  } else {  // per block
    offsetSums<kQK8_0>(acts, stride, n_tok, nb, type == TensorType::kQ4_0 ? 8 : 16, out);
  }
}

}  // namespace tpnode::model::kernels
