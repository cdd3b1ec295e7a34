#include "model/kernels/cpu/matmul.h"

#include <algorithm>
#include <cstring>

#include "common/check.h"
#include "model/kernels/cpu/dot.h"
#include "model/kernels/cpu/q0_x16.h"
#include "model/kernels/cpu/q4k_x16.h"
#include "model/kernels/cpu/q6k_x16.h"
#include "model/kernels/cpu/quantize.h"

namespace tpnode::model::kernels {
namespace {

constexpr int kRowTile = 8;  // rows per dot call (activation reuse)

// Whether any weight of the Q8_0 blocks in [data, data + bytes) is -128 (any block order).
bool q8_0HasMin(const uint8_t* data, size_t bytes) {
  const auto* blocks = reinterpret_cast<const BlockQ8_0*>(data);
  for (size_t b = 0; b < bytes / sizeof(BlockQ8_0); ++b) {
    for (int8_t q : blocks[b].qs) {
      if (q == -128) return true;
    }
  }
  return false;
}

// Super-blocks of a Q4_K group the AMX tiles take at a time: their unpacked values (8 KiB each)
// stay in the core's L1 cache while every tile of tokens runs on them.
constexpr int64_t kAmxChunkBlocks = 4;

// Weight bytes a thread reads next: [data, data + bytes), or nothing (data nullptr).
struct NextRows {
  const uint8_t* data = nullptr;
  size_t bytes = 0;
};

// The `rows` rows of w after the ones starting at r0 (fewer at the end, none past the last): the
// group or pair the thread running rows r0.. takes next, unless its share of the pool's tasks
// ends there (then another thread's first: a wasted prefetch of one group or pair).
NextRows rowsAfter(const Matrix& w, int64_t r0, int64_t rows) {
  const int64_t n = std::min(rows, w.rows - r0 - rows);
  if (n <= 0) return {};
  return {w.row(r0 + rows), static_cast<size_t>(n) * w.row_bytes};
}

// Runs fn(t, nt) over n_tokens in tiles of per_tile tokens (the last nt = what is left), and before
// each tile prefetches one slice of `next` into L2: the weights a thread takes next stream in
// while this group's tiles run, a few lines per tile. Issued in one burst instead (the unpacking
// of a group prefetching the next group's lines as it went), the prefetches stalled the unpacking
// on the core's outstanding misses: on AMD EPYC Zen 4 Q5_0's took ~130 cycles per 16 x 32 block in
// a 128-token prefill against ~32 with its group in L2.
template <typename Fn>
void eachTokenTile(int64_t n_tokens, int64_t per_tile, NextRows next, Fn fn) {
  if (n_tokens <= 0) return;
  const auto tiles = static_cast<size_t>((n_tokens + per_tile - 1) / per_tile);
  const size_t lines = (next.bytes + 63) / 64;
  const size_t per_tile_lines = (lines + tiles - 1) / tiles;
  size_t line = 0;
  for (int64_t t = 0; t < n_tokens; t += per_tile) {
    for (const size_t end = std::min(lines, line + per_tile_lines); line < end; ++line) {
      __builtin_prefetch(next.data + 64 * line, /*rw=*/0, /*locality=*/2);  // T1: into L2
    }
    fn(t, static_cast<int>(std::min<int64_t>(per_tile, n_tokens - t)));
  }
}

// One 16-row Q4_K group on AMX: the columns a chunk at a time (unpacked, then every tile of
// kAmxTokens tokens on it), each tile adding its chunk into y (zeroed first): per token the
// super-blocks are added in order, as the tile over all columns would.
void amxGroup(const Matrix& w, int64_t r0, const uint8_t* a, size_t a_bytes, int64_t n_tokens,
              float* y, int64_t y_stride, uint8_t* values, const DotKernels& k) {
  for (int64_t t = 0; t < n_tokens; ++t) std::fill_n(y + t * y_stride + r0, 16, 0.0f);
  const int64_t blocks = w.cols / kQKK;
  for (int64_t b0 = 0; b0 < blocks; b0 += kAmxChunkBlocks) {
    const int64_t nb = std::min(kAmxChunkBlocks, blocks - b0);
    const uint8_t* group = w.row(r0) + static_cast<size_t>(b0) * sizeof(BlockQ4Kx16);
    k.unpack16_q4_k_amx(nb * kQKK, group, values);
    eachTokenTile(n_tokens, kAmxTokens, NextRows{}, [&](int64_t t, int nt) {
      k.gemm16_values_q4_k_amx(
          nb * kQKK, group, values,
          a + static_cast<size_t>(t) * a_bytes + static_cast<size_t>(b0) * sizeof(BlockQ8K),
          a_bytes, nt, y + t * y_stride + r0, y_stride);
    });
  }
}

// This thread's buffer of at least `bytes` bytes for unpacked values, 64-byte aligned: each 64-byte
// row the tiles load is one cache line, not two.
uint8_t* threadValues(size_t bytes) {
  thread_local std::vector<uint8_t> buffer;
  buffer.resize(bytes + 63);
  return buffer.data() + (-reinterpret_cast<uintptr_t>(buffer.data()) & 63);
}

// Runs fn(r0, values) for every 16-row group of w (first row r0) on the pool's threads, values a
// per-thread buffer of value_bytes_per_column x w.cols bytes that stays in the core's caches.
template <typename Fn>
void eachGroupWithValues(const Matrix& w, int64_t value_bytes_per_column, ThreadPool& pool, Fn fn) {
  pool.parallelFor(w.rows / 16, 1, [&](int64_t g0, int64_t g1) {
    uint8_t* values = threadValues(static_cast<size_t>(value_bytes_per_column * w.cols));
    for (int64_t g = g0; g < g1; ++g) fn(g * 16, values);
  });
}

// Runs fn(r0, two) for every pair of 16-row groups of w (first row r0; `two` false for a last odd
// group alone) on the pool's threads, each thread taking whole pairs.
template <typename Fn>
void eachGroupPair(const Matrix& w, ThreadPool& pool, Fn fn) {
  const int64_t groups = w.rows / 16;
  pool.parallelFor((groups + 1) / 2, 1, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) fn(u * 32, 2 * u + 1 < groups);
  });
}

// Q4_K / Q6_K prefill over more tokens than one tile: each group is unpacked once to a byte per
// weight and every tile of kKQuantX16Tokens runs on the bytes, so the unpacking is paid once per
// group, not once per tile. Q4_K on AMX (k.gemm16_values_q4_k_amx): amxGroup, the same results.
void matmulKQuantValues(const Matrix& w, const uint8_t* a, size_t a_bytes, int64_t n_tokens,
                        float* y, int64_t y_stride, ThreadPool& pool, const DotKernels& k) {
  const bool q4k = w.type == TensorType::kQ4_K;
  const bool amx = q4k && k.gemm16_values_q4_k_amx;
  const Unpack16Fn unpack = q4k ? k.unpack16_q4_k : k.unpack16_q6_k;
  const Gemm16ValuesFn tile = q4k ? k.gemm16_values_q4_k : k.gemm16_values_q6_k;
  const int64_t value_bytes = amx   ? kAmxValueBytesPerColumn
                              : q4k ? kX16ValueBytesPerColumn
                                    : kX16Q6KValueBytesPerColumn;
  TP_CHECK(amx || (unpack && tile), "no unpacked 16-row kernel for {}", tensorTypeName(w.type));
  eachGroupWithValues(w, value_bytes, pool, [&](int64_t r0, uint8_t* values) {
    if (amx) {
      amxGroup(w, r0, a, a_bytes, n_tokens, y, y_stride, values, k);
      return;
    }
    unpack(w.cols, w.row(r0), values);
    eachTokenTile(n_tokens, kKQuantX16Tokens, rowsAfter(w, r0, 16), [&](int64_t t, int nt) {
      tile(w.cols, w.row(r0), values, a + static_cast<size_t>(t) * a_bytes, a_bytes, nt,
           y + t * y_stride + r0, y_stride);
    });
  });
}

// As eachGroupWithValues for pairs of groups: fn(r0, two, values) for group r0 / 16 and, where
// `two`, the next one (a last odd group alone); values holds both groups' bytes, the second's
// value_bytes_per_column x w.cols after the first's.
template <typename Fn>
void eachGroupPairWithValues(const Matrix& w, int64_t value_bytes_per_column, ThreadPool& pool,
                             Fn fn) {
  eachGroupPair(w, pool, [&](int64_t r0, bool two) {
    fn(r0, two, threadValues(static_cast<size_t>(2 * value_bytes_per_column * w.cols)));
  });
}

// Q5_0 prefill over more tokens than one tile, where the table unpacks groups (256-bit and AVX-512
// tables): as matmulKQuantValues, each group unpacked once and every tile of kQ0X16Tokens run on
// the bytes (spreading the 5th bits to bytes costs about as much as the tile's products for 4
// tokens on the 256-bit tables).
// offs: q0X16Offsets of the n_tokens rows, per_row values each.
void matmulQ0Values(const Matrix& w, const uint8_t* a, size_t a_bytes, const int32_t* offs,
                    int64_t per_row, int64_t n_tokens, float* y, int64_t y_stride, ThreadPool& pool,
                    const DotKernels& k) {
  const Unpack16Fn unpack = k.unpack16Q0ForType(w.type);
  const Gemm16ValuesQ0Fn tile = k.gemm16ValuesQ0ForType(w.type);
  TP_CHECK(unpack && tile, "no unpacked 16-row kernel for {}", tensorTypeName(w.type));
  const Gemm32ValuesQ0Fn pairs = k.gemm32ValuesQ0ForType(w.type);
  if (pairs) {  // two groups per tile (a last odd group alone)
    const size_t vb = static_cast<size_t>(kX16ValueBytesPerColumn * w.cols);
    eachGroupPairWithValues(
        w, kX16ValueBytesPerColumn, pool, [&](int64_t r0, bool two, uint8_t* values) {
          unpack(w.cols, w.row(r0), values);
          if (two) unpack(w.cols, w.row(r0 + 16), values + vb);
          eachTokenTile(n_tokens, two ? kQ0X32Tokens : kQ0X16Tokens, rowsAfter(w, r0, 32),
                        [&](int64_t t, int nt) {
                          const uint8_t* at = a + static_cast<size_t>(t) * a_bytes;
                          float* yt = y + t * y_stride + r0;
                          if (two) {
                            pairs(w.cols, w.row(r0), w.row_bytes * 16, values, vb, at, a_bytes,
                                  offs + t * per_row, nt, yt, y_stride);
                          } else {
                            tile(w.cols, w.row(r0), values, at, a_bytes, offs + t * per_row, nt, yt,
                                 y_stride);
                          }
                        });
        });
    return;
  }
  eachGroupWithValues(w, kX16ValueBytesPerColumn, pool, [&](int64_t r0, uint8_t* values) {
    unpack(w.cols, w.row(r0), values);
    eachTokenTile(n_tokens, kQ0X16Tokens, rowsAfter(w, r0, 16), [&](int64_t t, int nt) {
      tile(w.cols, w.row(r0), values, a + static_cast<size_t>(t) * a_bytes, a_bytes,
           offs + t * per_row, nt, y + t * y_stride + r0, y_stride);
    });
  });
}

// Weights repacked 16 rows per group (interleave 16): each thread takes whole groups; prefill
// runs 4 tokens per tile (Q4_K / Q6_K: kKQuantX16Tokens; Q8_0 / Q4_0 / Q5_0: kQ0X16Tokens) so a
// group's weights are unpacked once for that many tokens. The tile of w's type is one of two kinds:
// Q4_K, Q6_K and Q5_1 (whose Q8_1 blocks carry their sums) take the activations only; Q8_0 / Q4_0 /
// Q5_0's also take the activation offsets their unsigned weights' offsets come out with (`offs`,
// q0X16Offsets: n_tokens x q0X16OffsetsPerRow; nullptr for the others).
void matmulGroups16(const Matrix& w, const uint8_t* a, size_t a_bytes, const int32_t* offs,
                    int64_t n_tokens, float* y, int64_t y_stride, ThreadPool& pool,
                    const DotKernels& k) {
  const Gemm16Q0Fn with_offs = k.gemm16Q0ForType(w.type);
  const GemmTileFn acts_only = with_offs ? nullptr : k.gemm16ForType(w.type);
  TP_CHECK(
      (with_offs != nullptr) == (offs != nullptr) && (with_offs || acts_only) && w.rows % 16 == 0,
      "no 16-row kernel for {}", tensorTypeName(w.type));
  TP_CHECK(w.type != TensorType::kQ6_K || w.q6k_linear == k.q6k_x16_linear,
           "Q6_K matrix packed in the {} arrangement, run with the {} table, which reads the other",
           w.q6k_linear ? "linear" : "split", k.isa);
  const int64_t per_row = with_offs ? q0X16OffsetsPerRow(w.type, w.cols) : 0;
  const Gemv16Fn gemv = n_tokens == 1 ? k.gemv16ForType(w.type) : nullptr;
  if (gemv) {  // decode: each thread's groups in one call (the kernel reads several side by side)
    pool.parallelFor(w.rows / 16, 1, [&](int64_t g0, int64_t g1) {
      gemv(w.cols, w.row(g0 * 16), w.row_bytes * 16, g1 - g0, a, offs, y + g0 * 16);
    });
    return;
  }
  const bool k_quant = w.type == TensorType::kQ4_K || w.type == TensorType::kQ6_K;
  const int64_t tile_tokens = k_quant ? kKQuantX16Tokens : with_offs ? kQ0X16Tokens : 4;
  if (k_quant && n_tokens > tile_tokens) {
    matmulKQuantValues(w, a, a_bytes, n_tokens, y, y_stride, pool, k);
    return;
  }
  if (with_offs && n_tokens > tile_tokens && k.gemm16ValuesQ0ForType(w.type)) {
    matmulQ0Values(w, a, a_bytes, offs, per_row, n_tokens, y, y_stride, pool, k);
    return;
  }
  const Gemm32Q0Fn pairs = k.gemm32Q0ForType(w.type);
  if (pairs) {  // two groups per tile (a last odd group alone), each thread whole pairs
    eachGroupPair(w, pool, [&](int64_t r0, bool two) {
      eachTokenTile(
          n_tokens, two ? kQ0X32Tokens : tile_tokens, rowsAfter(w, r0, 32), [&](int64_t t, int nt) {
            const uint8_t* at = a + static_cast<size_t>(t) * a_bytes;
            float* yt = y + t * y_stride + r0;
            if (two) {
              pairs(w.cols, w.row(r0), w.row_bytes * 16, at, a_bytes, offs + t * per_row, nt, yt,
                    y_stride);
            } else {
              with_offs(w.cols, w.row(r0), at, a_bytes, offs + t * per_row, nt, yt, y_stride);
            }
          });
    });
    return;
  }
  pool.parallelFor(w.rows / 16, 1, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t r0 = g * 16;
      eachTokenTile(n_tokens, tile_tokens, rowsAfter(w, r0, 16), [&](int64_t t, int nt) {
        const uint8_t* at = a + static_cast<size_t>(t) * a_bytes;
        float* yt = y + t * y_stride + r0;
        if (with_offs) {
          with_offs(w.cols, w.row(r0), at, a_bytes, offs + t * per_row, nt, yt, y_stride);
        } else {
          acts_only(w.cols, w.row(r0), at, a_bytes, nt, yt, y_stride);
        }
      });
    }
  });
}

}  // namespace

void matmul(const Matrix& w, const float* x, int64_t n_tokens, float* y, int64_t y_stride,
            ThreadPool& pool, std::vector<uint8_t>& scratch, const DotKernels& k) {
  MatmulScratch s;
  s.bytes.swap(scratch);
  matmul(w, x, n_tokens, y, y_stride, pool, s, false, k);
  scratch.swap(s.bytes);
}

namespace {

// Where a matmul of w over n_tokens rows keeps its converted activations in the scratch.
struct ActsLayout {
  bool widened;     // plain F16 rows' tile: activations rounded to F16 and kept as F32
  TensorType type;  // of the converted activations (kF32 and not widened: x itself, no scratch)
  size_t row_bytes;
  bool with_offs;  // the x16 Q8_0 / Q4_0 / Q5_0 kernels' offsets follow the rows, at offs_at
  size_t offs_at;
  size_t bytes;  // of the scratch in all
  bool converted() const { return type != TensorType::kF32 || widened; }
};

// Prefill on plain F16 / BF16 rows runs in tiles of rows x tokens (nullptr: not this matmul).
GemmRowsFn rowsTileFor(const Matrix& w, int64_t n_tokens, const DotKernels& k) {
  return w.interleave == 1 && n_tokens > 1 ? k.gemmRowsForType(w.type) : nullptr;
}

ActsLayout actsLayout(const Matrix& w, int64_t n_tokens, const DotKernels& k) {
  ActsLayout l{};
  // The F16 rows tile takes its activations widened back to F32 (the same values as F16
  // activations).
  l.widened = rowsTileFor(w, n_tokens, k) && w.type == TensorType::kF16;
  l.type = l.widened ? TensorType::kF32 : activationType(w.type);
  l.row_bytes = rowBytes(l.type, static_cast<uint64_t>(w.cols));
  l.with_offs = w.interleave == kQ0Group && k.gemm16Q0ForType(w.type);
  l.offs_at = (l.row_bytes * static_cast<size_t>(n_tokens) + 63) / 64 * 64;
  l.bytes = l.with_offs
                ? l.offs_at + static_cast<size_t>(n_tokens * q0X16OffsetsPerRow(w.type, w.cols)) * 4
                : l.row_bytes * static_cast<size_t>(n_tokens);
  return l;
}

}  // namespace

size_t matmulScratchBytes(const Matrix& w, int64_t n_tokens, const DotKernels& k) {
  const ActsLayout l = actsLayout(w, n_tokens, k);
  return l.converted() ? l.bytes : 0;
}

void matmul(const Matrix& w, const float* x, int64_t n_tokens, float* y, int64_t y_stride,
            ThreadPool& pool, MatmulScratch& scratch, bool same_x, const DotKernels& k) {
  TP_CHECK(!w.empty());
  if (!same_x) scratch.acts_valid = false;  // a new x: what the scratch holds is stale
  const GemmRowsFn rows_tile = rowsTileFor(w, n_tokens, k);
  const ActsLayout layout = actsLayout(w, n_tokens, k);
  const bool widened = layout.widened, with_offs = layout.with_offs;
  const TensorType at = layout.type;
  const size_t a_bytes = layout.row_bytes, sums_at = layout.offs_at, need = layout.bytes;
  const void* acts = x;
  int32_t* offs = nullptr;
  if (layout.converted()) {
    MatmulScratch& s = scratch;
    const bool acts_ok = same_x && s.acts_valid && s.acts_type == at && s.acts_widened == widened &&
                         s.acts_cols == w.cols && s.acts_tokens == n_tokens && s.acts_table == &k;
    const bool offs_ok = acts_ok && s.offs_valid && s.offs_type == w.type;
    if (s.bytes.size() < need) s.bytes.resize(need);  // keeps what it holds
    uint8_t* q = s.bytes.data();
    if (with_offs) offs = reinterpret_cast<int32_t*>(q + sums_at);
    const int64_t per_row = with_offs ? q0X16OffsetsPerRow(w.type, w.cols) : 0;
    const QuantizeFn quant = at == TensorType::kQ8_K   ? k.quantize_q8_k
                             : at == TensorType::kQ8_0 ? k.quantize_q8_0
                             : widened                 ? k.round_f16
                                                       : nullptr;
    // Each token's row and (x16 Q8_0 / Q4_0 / Q5_0) its offsets, on the thread that quantized it.
    if (!acts_ok || (with_offs && !offs_ok)) {
      pool.parallelFor(n_tokens, 4, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1 && !acts_ok; ++t) {
          if (quant) {
            quant(x + t * w.cols, q + static_cast<size_t>(t) * a_bytes, w.cols);
          } else {
            quantizeRow(at, x + t * w.cols, q + static_cast<size_t>(t) * a_bytes, w.cols);
          }
        }
        if (offs && !offs_ok) {
          q0X16Offsets(w.type, q + static_cast<size_t>(t0) * a_bytes, a_bytes, t1 - t0, w.cols,
                       offs + t0 * per_row);
        }
      });
    }
    if (!acts_ok) {
      s.acts_valid = true;
      s.acts_type = at;
      s.acts_widened = widened;
      s.acts_cols = w.cols;
      s.acts_tokens = n_tokens;
      s.acts_table = &k;
      s.offs_valid = false;
    }
    if (with_offs) {
      s.offs_valid = true;
      s.offs_type = w.type;
    }
    acts = q;
  }
  const uint8_t* a = static_cast<const uint8_t*>(acts);
  if (w.interleave == 16) {
    matmulGroups16(w, a, a_bytes, offs, n_tokens, y, y_stride, pool, k);
    return;
  }
  const DotFn dot = k.forType(w.type);
  const Dot4Fn dot4 = w.interleave == 4 ? k.x4ForType(w.type, w.q8_no_min) : nullptr;
  const GemmTileFn gemm = w.interleave == 4 ? k.gemmForType(w.type) : nullptr;
  const GemmPanelFn panel = w.interleave == 4 ? k.gemmPanelForType(w.type) : nullptr;
  TP_CHECK(w.interleave == 1 || dot4, "interleaved {} without a 4-row kernel",
           tensorTypeName(w.type));
  const int64_t tiles = (w.rows + kRowTile - 1) / kRowTile;
  pool.parallelFor(tiles, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t r0 = b * kRowTile;
      const int nr = static_cast<int>(std::min<int64_t>(kRowTile, w.rows - r0));
      if (panel && n_tokens > 1) {  // all tokens per 4 rows: the rows' own work done once
        for (int g = 0; g < nr; g += 4) {
          panel(w.cols, w.row(r0 + g), a, a_bytes, static_cast<int>(n_tokens), y + r0 + g,
                y_stride);
        }
        continue;
      }
      if (gemm && n_tokens > 1) {
        eachTokenTile(n_tokens, 4, NextRows{}, [&](int64_t t, int nt) {
          for (int g = 0; g < nr; g += 4) {
            gemm(w.cols, w.row(r0 + g), a + static_cast<size_t>(t) * a_bytes, a_bytes, nt,
                 y + t * y_stride + r0 + g, y_stride);
          }
        });
        continue;
      }
      if (rows_tile) {
        eachTokenTile(n_tokens, 4, NextRows{}, [&](int64_t t, int nt) {
          for (int g = 0; g < nr; g += 4) {
            rows_tile(w.cols, w.row(r0 + g), w.row_bytes, std::min(4, nr - g),
                      a + static_cast<size_t>(t) * a_bytes, a_bytes, nt, y + t * y_stride + r0 + g,
                      y_stride);
          }
        });
        continue;
      }
      for (int64_t t = 0; t < n_tokens; ++t) {
        const uint8_t* at_t = a + static_cast<size_t>(t) * a_bytes;
        float* yt = y + t * y_stride + r0;
        if (dot4) {  // kRowTile is a multiple of 4 and rows % 4 == 0
          for (int g = 0; g < nr; g += 4) dot4(w.cols, w.row(r0 + g), at_t, yt + g);
        } else {
          dot(w.cols, w.row(r0), w.row_bytes, nr, at_t, yt);
        }
      }
    }
  });
}

Matrix packWeights(Matrix m, WeightLayout layout, const DotKernels& k) {
  if (m.empty() || m.interleave != 1 || layout == WeightLayout::kPlain) return m;
  const bool x16 = (k.gemm16ForType(m.type) || k.gemm16Q0ForType(m.type)) && m.rows % 16 == 0;
  if (x16 && layout != WeightLayout::kRows4) {
    const bool q4k = m.type == TensorType::kQ4_K;
    const size_t row_bytes = q4k ? q4kX16RowBytes(m.cols) : m.row_bytes;
    HostBuffer packed(row_bytes * static_cast<size_t>(m.rows));
    if (q4k) {
      repackQ4Kx16(m.data.data(), packed.data(), m.rows, m.cols);
    } else if (m.type == TensorType::kQ6_K && k.q6k_x16_linear) {
      repackQ6Kx16Linear(m.data.data(), packed.data(), m.rows, m.cols);
      m.q6k_linear = true;
    } else if (m.type == TensorType::kQ6_K) {
      repackQ6Kx16(m.data.data(), packed.data(), m.rows, m.cols);
    } else {  // Q8_0, Q4_0, Q5_0, Q5_1
      repackQ0x16(m.type, m.data.data(), packed.data(), m.rows, m.cols);
    }
    m.data = std::move(packed);
    m.row_bytes = row_bytes;
    m.interleave = 16;
    return m;
  }
  if (m.rows % 4 != 0 || !k.x4ForType(m.type)) return m;
  interleaveRows4(m.type, m.data.data(), m.rows, m.cols);
  m.interleave = 4;
  if (m.type == TensorType::kQ8_0) m.q8_no_min = !q8_0HasMin(m.data.data(), m.data.size());
  return m;
}

void matrixGroupBytes(const Matrix& w, int64_t g, uint8_t* out) {
  const int64_t r0 = g * w.interleave;
  TP_CHECK(g >= 0 && r0 < w.rows);
  const size_t plain = rowBytes(w.type, static_cast<uint64_t>(w.cols));
  switch (w.interleave) {
    case 1:
      std::memcpy(out, w.row(r0), plain);
      return;
    case 4: {  // undoes interleaveRows4
      const size_t bs = tensorTypeInfo(w.type).type_size;
      const size_t nb = plain / bs;
      for (size_t r = 0; r < 4; ++r) {
        for (size_t b = 0; b < nb; ++b) {
          std::memcpy(out + r * plain + b * bs, w.row(r0) + (b * 4 + r) * bs, bs);
        }
      }
      return;
    }
    case 16:
      if (w.type == TensorType::kQ4_K) {
        unpackQ4Kx16(w.row(r0), out, 16, w.cols);
      } else if (w.type == TensorType::kQ6_K && w.q6k_linear) {
        unpackQ6Kx16Linear(w.row(r0), out, 16, w.cols);
      } else if (w.type == TensorType::kQ6_K) {
        unpackQ6Kx16(w.row(r0), out, 16, w.cols);
      } else {
        unpackQ0x16(w.type, w.row(r0), out, 16, w.cols);
      }
      return;
    default:
      TP_CHECK(false, "unexpected interleave {}", w.interleave);
  }
}

void matrixRowBytes(const Matrix& w, int64_t r, uint8_t* out) {
  TP_CHECK(r >= 0 && r < w.rows);
  const size_t plain = rowBytes(w.type, static_cast<uint64_t>(w.cols));
  if (w.interleave == 1) {
    std::memcpy(out, w.row(r), plain);
    return;
  }
  std::vector<uint8_t> group(plain * static_cast<size_t>(w.interleave));
  matrixGroupBytes(w, r / w.interleave, group.data());
  std::memcpy(out, group.data() + static_cast<size_t>(r % w.interleave) * plain, plain);
}

void dequantizeMatrixRow(const Matrix& w, int64_t r, float* out) {
  if (w.interleave == 1) {
    TP_CHECK(r >= 0 && r < w.rows);
    dequantizeRow(w.type, w.row(r), out, w.cols);
    return;
  }
  std::vector<uint8_t> row(rowBytes(w.type, static_cast<uint64_t>(w.cols)));
  matrixRowBytes(w, r, row.data());
  dequantizeRow(w.type, row.data(), out, w.cols);
}

}  // namespace tpnode::model::kernels
