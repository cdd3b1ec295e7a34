// Q4_K prefill on AMX tiles (AMX-TILE + AMX-INT8): a 16-row group against up to 16 tokens of
// Q8_K activations per call. Compiled with those flags and called only when the CPU has them and
// Linux let this process use them (amxQ4KValuesTile).
//
// A Q4_K row's integer sum over a super-block is sum_j s_j x S_j (s_j: the 6-bit scale of
// sub-block j, S_j: the activations . nibbles over its 32 columns). The group is unpacked once
// (unpackQ4KAmx) to the products s_j x q (<= 945) split into low and high bytes, so that tdpbsud
// takes 64 columns at a time across sub-blocks: per super-block, 4 tdpbsud on the low bytes and 4
// on the high bytes (tokens x 64 signed activation bytes times 64 columns x 16 rows of unsigned
// bytes) give lo + 256 hi = sum_j s_j x S_j exactly for every token and row. Everything after that
// is the AVX-512 tile's arithmetic on the same integers: times 16, then the scales and mins per
// token through the same code (q4kAddTokenBlock, q4k_x16_scale.h). So each token's outputs are
// those of gemm16_values_q4_k, bit for bit (q4k_x16_test).
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "model/kernels/cpu/blocks.h"
#include "model/kernels/cpu/dot.h"
#include "model/kernels/cpu/q4k_x16.h"
#include "model/kernels/cpu/q4k_x16_scale.h"

// gcc 12's 512-bit intrinsics start from _mm512_undefined_*(), which -Wmaybe-uninitialized
// reports once inlined; the value is never read.
#pragma GCC diagnostic push
#if !defined(__clang__)  // GCC only: clang has no such warning group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace tpnode::model::kernels {
namespace {

static_assert(kAmxTokens == 16, "a tile holds 16 rows");

// Tile registers: C tiles (tokens x 16 i32) 0-1 for even super-blocks and 2-3 for odd ones (the
// low and the high bytes of s x q), so that a super-block's zeroing does not wait for the stores of
// the one before; A tiles 4-5 (tokens x 64 i8); B tiles 6-7 (16 x 64 u8).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

// Loads the tile shapes for `n_tok` tokens unless this thread has them already.
void configureTiles(int n_tok) {
  thread_local int configured = 0;
  if (configured == n_tok) return;
  TileConfig c;
  for (int i = 0; i < 6; ++i) {  // C and A: a row per token
    c.rows[i] = static_cast<uint8_t>(n_tok);
    c.colsb[i] = 64;
  }
  for (int i = 6; i < 8; ++i) {
    c.rows[i] = 16;
    c.colsb[i] = 64;
  }
  // The whole 64 bytes as the asm's operand (_tile_loadconfig names only the first 8, so the
  // compiler could drop the stores of the rest).
  __asm__ volatile("ldtilecfg %0" ::"m"(c));
  configured = n_tok;
}

constexpr size_t kQsOffset = offsetof(BlockQ8K, qs);
constexpr int64_t kHalfBytes = 4096;  // per super-block: the low bytes, then the high bytes

// Unpack16Fn for the AMX tile: per super-block b, the products s x q (s: the row's 6-bit scale of
// the sub-block, q: the nibble; at most 63 x 15 = 945) of all 16 rows split into their low bytes
// (values + 8192 b) and high bytes (+ 4096), each as 4 B tiles of 64 columns: row kk of tile kc
// holds columns 64 kc + 4 kk .. + 3 of every row, 4 bytes per row (tdpbsud's B layout).
void unpackQ4KAmx(int64_t n, const void* group, uint8_t* values) {
  const auto* x = static_cast<const BlockQ4Kx16*>(group);
  const __m512i low_nibbles = _mm512_set1_epi8(0x0F);
  const __m512i low_bytes = _mm512_set1_epi16(0x00FF);
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const BlockQ4Kx16& xb = x[b];
    uint8_t* lo = values + 2 * kHalfBytes * b;
    for (int p = 0; p < 4; ++p) {
      for (int h = 0; h < 2; ++h) {  // sub-block j = 2p + h: low (h = 0) or high nibbles of qs[p]
        const int j = 2 * p + h;
        const __m512i s32 =
            _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.scales[j])));
        const __m512i s16 = _mm512_or_si512(s32, _mm512_slli_epi32(s32, 16));  // s per u16 lane
        for (int c = 0; c < 8; ++c) {  // columns 32 j + 4 c .. + 3 of the 16 rows
          const __m512i bits = _mm512_loadu_si512(xb.qs[p][c]);
          const __m512i q =
              _mm512_and_si512(h == 0 ? bits : _mm512_srli_epi16(bits, 4), low_nibbles);
          const __m512i even = _mm512_mullo_epi16(_mm512_and_si512(q, low_bytes), s16);
          const __m512i odd = _mm512_mullo_epi16(_mm512_srli_epi16(q, 8), s16);
          const __m512i l =
              _mm512_or_si512(_mm512_and_si512(even, low_bytes), _mm512_slli_epi16(odd, 8));
          const __m512i hb =
              _mm512_or_si512(_mm512_srli_epi16(even, 8), _mm512_andnot_si512(low_bytes, odd));
          _mm512_storeu_si512(lo + 512 * j + 64 * c, l);
          _mm512_storeu_si512(lo + kHalfBytes + 512 * j + 64 * c, hb);
        }
      }
    }
  }
}

// Columns 64 KC .. + 63 of a super-block: C_LO, C_HI += the activations (A tile A) times the low
// and high bytes of s x q there (B tiles 6, 7).
#define TP_AMX_COLUMNS(KC, A, C_LO, C_HI)                    \
  do {                                                       \
    _tile_loadd(A, acts_b + 64 * (KC), stride);              \
    _tile_loadd(6, values_b + 1024 * (KC), 64);              \
    _tile_dpbsud(C_LO, A, 6);                                \
    _tile_loadd(7, values_b + kHalfBytes + 1024 * (KC), 64); \
    _tile_dpbsud(C_HI, A, 7);                                \
  } while (0)

// One super-block's sums for every token into sums[0] (low bytes) and sums[1] (high bytes).
#define TP_AMX_SUPER_BLOCK(C_LO, C_HI) \
  do {                                 \
    _tile_zero(C_LO);                  \
    _tile_zero(C_HI);                  \
    TP_AMX_COLUMNS(0, 4, C_LO, C_HI);  \
    TP_AMX_COLUMNS(1, 5, C_LO, C_HI);  \
    TP_AMX_COLUMNS(2, 4, C_LO, C_HI);  \
    TP_AMX_COLUMNS(3, 5, C_LO, C_HI);  \
    _tile_stored(C_LO, sums[0], 64);   \
    _tile_stored(C_HI, sums[1], 64);   \
  } while (0)

void q4kAmxTile(int64_t n, const void* group, const uint8_t* values, const void* acts,
                size_t act_stride, int n_tok, float* out, int64_t out_stride) {
  const auto* x = static_cast<const BlockQ4Kx16*>(group);
  const auto* a = static_cast<const uint8_t*>(acts);
  const long stride = static_cast<long>(act_stride);
  configureTiles(n_tok);
  alignas(64) int32_t sums[2][kAmxTokens][16];  // low and high bytes' sums
  alignas(64) float acc[kAmxTokens][16];
  for (int t = 0; t < n_tok; ++t) _mm512_store_ps(acc[t], _mm512_loadu_ps(out + t * out_stride));
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const BlockQ4Kx16& xb = x[b];
    const uint8_t* acts_b = a + static_cast<size_t>(b) * sizeof(BlockQ8K) + kQsOffset;
    const uint8_t* values_b = values + 2 * kHalfBytes * b;
    if (b % 2 == 0) {
      TP_AMX_SUPER_BLOCK(0, 1);
    } else {
      TP_AMX_SUPER_BLOCK(2, 3);
    }
    const Q4KRowScales scales = q4kRowScales(xb);
    for (int t = 0; t < n_tok; ++t) {
      // sum over sub-blocks of s x S, exactly (|.| <= 8 x 63 x 61440 < 2^25), times 16
      __m512i sumi = _mm512_add_epi32(_mm512_load_si512(sums[0][t]),
                                      _mm512_slli_epi32(_mm512_load_si512(sums[1][t]), 8));
      sumi = _mm512_slli_epi32(sumi, 4);
      const BlockQ8K& y = *reinterpret_cast<const BlockQ8K*>(
          a + t * act_stride + static_cast<size_t>(b) * sizeof(BlockQ8K));
      const __m512 v = q4kAddTokenBlock(scales, y, sumi, _mm512_load_ps(acc[t]));
      _mm512_store_ps(acc[t], v);
    }
  }
  for (int t = 0; t < n_tok; ++t) _mm512_storeu_ps(out + t * out_stride, _mm512_load_ps(acc[t]));
}

#undef TP_AMX_SUPER_BLOCK
#undef TP_AMX_COLUMNS

// AMX-TILE (CPUID.(7,0):EDX[24]) and AMX-INT8 (EDX[25]), the OS saving tile state (XCR0 bits 17
// and 18), and Linux's permission for this process to use it (arch_prctl ARCH_REQ_XCOMP_PERM for
// XTILEDATA, Linux 5.16 and later).
bool amxUsable() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;  // OSXSAVE
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  if (!(d & (1u << 24)) || !(d & (1u << 25))) return false;
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & (3u << 17)) != (3u << 17)) return false;
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

bool amxQ4KUsable() {
  static const bool usable = amxUsable();
  return usable;
}

}  // namespace

Gemm16ValuesFn amxQ4KValuesTile() {
  return amxQ4KUsable() ? q4kAmxTile : nullptr;
}

Unpack16Fn amxQ4KUnpack() {
  return amxQ4KUsable() ? unpackQ4KAmx : nullptr;
}

}  // namespace tpnode::model::kernels

#pragma GCC diagnostic pop
