// Dot products of one weight row with one activation row, per weight type, on the weight's
// native blocks (nothing is dequantized). The activation row is already converted to the
// weight type's activation type (activationType): F32 -> F32, F16 -> F16, BF16 -> BF16,
// Q8_0/Q4_0/Q5_0 -> Q8_0, Q5_1 -> Q8_1, Q4_K/Q6_K -> Q8_K, as llama.cpp's CPU backend does.
// Quantized dot products sum integer products per block and scale them once per block, so every
// path (scalar, AVX2, AVX-512 VNNI) gives the same value up to float summation order.
//
// Kernel tables are immutable; the best one is picked once at run time from the CPU's
// features (env TPNODE_CPU_ISA=scalar|avx2|avx2vnni|avx512 forces one) and may be used from any
// thread.
#pragma once

#include <cstdint>
#include <string_view>

#include "model/tensor_type.h"

namespace tpnode::model::kernels {

// out[r] = dot(row r of w, a) for r in [0, nr); w rows are `w_stride` bytes apart.
using DotFn = void (*)(int64_t n, const void* w, size_t w_stride, int nr, const void* a,
                       float* out);

// out[0..3] = dot of 4 rows stored interleaved (block b of row r at block index b * 4 + r,
// see interleaveRows4) with a. nullptr where a table has none (scalar, float types).
using Dot4Fn = void (*)(int64_t n, const void* group, const void* a, float* out);

// out[i] += sum over r < nr of w[r] * rows[r][i] for i < n, rows `stride` bytes apart, added in
// row order (attention's probability-weighted sum of V rows).
using AxpyFn = void (*)(int64_t n, const void* rows, size_t stride, int nr, const float* w,
                        float* out);

// Activations of a row of n finite floats as the blocks of an activation type (quantize_q8_k:
// n % 256 == 0, byte for byte what quantizeRowQ8K writes; see the table's fields).
using QuantizeFn = void (*)(const float* x, void* y, int64_t n);

// Prefill tile: 4 interleaved rows x n_tok (1..4) activation rows `act_stride` bytes apart;
// out[t * out_stride + r]. Same per-block arithmetic as Dot4Fn.
using GemmTileFn = void (*)(int64_t n, const void* group, const void* acts, size_t act_stride,
                            int n_tok, float* out, int64_t out_stride);

// Prefill panel: as GemmTileFn for any n_tok >= 1, the rows' own per-block work (scales, checks)
// done once for all the tokens. Same results, bit for bit, as the type's GemmTileFn.
using GemmPanelFn = GemmTileFn;

// Q8_0 / Q4_0 / Q5_0 repacked 16 rows per group (q0_x16.h): 16 rows x n_tok (1..kQ0X16Tokens)
// activation rows `act_stride` bytes apart; out[t * out_stride + 0..15]. act_offsets: q0X16Offsets
// of the n_tok rows (q0X16OffsetsPerRow values each). Q4_0 / Q5_0 unpack each weight vector once
// for all n_tok tokens; Q8_0 runs them two at a time (8 float accumulators per token). Q8_0 sums in
// llama.cpp's x86 order: per row 8 float lanes, lane k = fma(d_w * d_a, float(integer sum of
// columns 4k..4k+3 of the block), lane k) in block order, folded as
// ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)) (ggml_vec_dot_q8_0_q8_0's hsum_float_8); Q4_0 / Q5_0 as one
// float per row, fma(float(block sum), d_w * d_a, acc).
constexpr int kQ0X16Tokens = 8;
using Gemm16Q0Fn = void (*)(int64_t n, const void* group, const void* acts, size_t act_stride,
                            const int32_t* act_offsets, int n_tok, float* out, int64_t out_stride);

// Q4_0 (and, on unpacked values, Q5_0: Gemm32ValuesQ0Fn) on two adjacent 16-row groups at once
// (`group_bytes` apart): 32 rows x n_tok
// (1..kQ0X32Tokens); out[t * out_stride + 0..15] the first group's rows, + 16..31 the second's.
// Each activation word is broadcast once for both groups (on AMD Zen 5, which issues two 512-bit
// or broadcast loads per cycle, the 16-row tile's broadcasts bound it); each group's results are
// Gemm16Q0Fn's bit for bit (the same integer block sums and float operations in the same order).
constexpr int kQ0X32Tokens = 4;
using Gemm32Q0Fn = void (*)(int64_t n, const void* groups, size_t group_bytes, const void* acts,
                            size_t act_stride, const int32_t* act_offsets, int n_tok, float* out,
                            int64_t out_stride);

// Decode on a 16-row repacked layout (q0_x16.h, q4k_x16.h, q6k_x16.h): groups [0, n_groups),
// `group_bytes` apart, against one activation row; out[16 g + r]. offs: q0X16Offsets of the row for
// Q8_0 / Q4_0 / Q5_0, nullptr for the others. Per group the same arithmetic, in the same order, as
// the type's 16-row tile with n_tok = 1 (bit-identical results); the kernel reads the range as
// several weight streams side by side, which one call per group could not.
using Gemv16Fn = void (*)(int64_t n, const void* groups, size_t group_bytes, int64_t n_groups,
                          const void* act, const int32_t* offs, float* out);

// Prefill tile on plain rows: nr (1..4) rows `w_stride` bytes apart x n_tok (1..4) activation rows
// `act_stride` bytes apart; out[t * out_stride + r]. Per row and token one accumulator of
// float lanes runs over the columns in order and is summed horizontally at the end; columns past
// the last whole vector are added one by one after it (as llama.cpp's tinyBLAS on F16 / BF16).
// The F16 tile takes its activations as F32 holding F16 values (round_f16); the BF16 tile takes
// BF16 activations.
using GemmRowsFn = void (*)(int64_t n, const void* w, size_t w_stride, int nr, const void* acts,
                            size_t act_stride, int n_tok, float* out, int64_t out_stride);

// Tokens a 16-row Q4_K / Q6_K prefill tile (gemm16_q4_k, gemm16_q6_k) takes at most: each weight
// vector it unpacks serves that many tokens.
constexpr int kKQuantX16Tokens = 8;

// A 16-row Q4_K / Q6_K group (q4k_x16.h, q6k_x16.h) of n columns unpacked to one byte per weight,
// in the order its tile reads them: `values` holds kX16ValueBytesPerColumn x n bytes. Prefill over
// more tokens than one tile unpacks a group once and runs every tile on the bytes.
constexpr int64_t kX16ValueBytesPerColumn = 16;
// The buffer a Q6_K group's unpack16_q6_k takes: the AVX-512 table's adds per 256-column block 64
// bytes of row corrections after the values (dot_x86_q6k_x16.inc), so one byte more per column.
constexpr int64_t kX16Q6KValueBytesPerColumn = kX16ValueBytesPerColumn + 1;

// Tokens the AMX Q4_K tile (gemm16_values_q4_k_amx) takes at most: one AMX tile row per token;
// bytes per column of a 16-row group that unpack16_q4_k_amx writes for it.
constexpr int kAmxTokens = 16;
constexpr int64_t kAmxValueBytesPerColumn = 32;
using Unpack16Fn = void (*)(int64_t n, const void* group, uint8_t* values);

// The 16-row Q4_K / Q6_K tile on the packed group (its scales) and its unpacked values: the same
// results, bit for bit, as the GemmTileFn on the group alone.
using Gemm16ValuesFn = void (*)(int64_t n, const void* group, const uint8_t* values,
                                const void* acts, size_t act_stride, int n_tok, float* out,
                                int64_t out_stride);

// The 16-row Q5_0 tile (Gemm16Q0Fn) on the packed group (its scales) and its values
// unpacked by the table's unpack16 for the type (kX16ValueBytesPerColumn per column: per block and
// row half, the 8 weight vectors the tile would unpack): the same results, bit for bit, as the
// Gemm16Q0Fn on the group alone.
using Gemm16ValuesQ0Fn = void (*)(int64_t n, const void* group, const uint8_t* values,
                                  const void* acts, size_t act_stride, const int32_t* act_offsets,
                                  int n_tok, float* out, int64_t out_stride);

// The Q5_0 tile on the values of two adjacent groups at once (AVX-512), as Gemm32Q0Fn: the
// second group's packed bytes `group_bytes` and its values (unpack16_q5_0's) `value_bytes` after
// the first's; each group's results are Gemm16ValuesQ0Fn's bit for bit.
using Gemm32ValuesQ0Fn = void (*)(int64_t n, const void* groups, size_t group_bytes,
                                  const uint8_t* values, size_t value_bytes, const void* acts,
                                  size_t act_stride, const int32_t* act_offsets, int n_tok,
                                  float* out, int64_t out_stride);

struct DotKernels {
  std::string_view isa;
  DotFn f32, f16, bf16, q8_0, q4_0, q4_k, q6_k;
  Dot4Fn x4_q8_0 = nullptr, x4_q4_0 = nullptr, x4_q4_k = nullptr, x4_q6_k = nullptr;
  GemmTileFn gemm_q8_0 = nullptr, gemm_q4_0 = nullptr, gemm_q6_k = nullptr, gemm_q4_k = nullptr;
  DotFn q5_0 = nullptr, q5_1 = nullptr;  // vec_dot_q5_0_q8_0, vec_dot_q5_1_q8_1
  Dot4Fn x4_q5_0 = nullptr;
  GemmTileFn gemm_q5_0 = nullptr;
  Dot4Fn x4_q5_1 = nullptr;  // Q5_1 against Q8_1, as x4_q5_0 / gemm_q5_0
  GemmTileFn gemm_q5_1 = nullptr;
  // Q4_K repacked 16 rows per group (q4k_x16.h): out[0..15] / out[t * out_stride + 0..15].
  // Same per-block arithmetic as dot / x4; nullptr where a table has none (Q4_K: every x86
  // table; Q6_K, Q5_1: AVX-512).
  // The 16-row Q4_K / Q6_K tiles take n_tok 1..kKQuantX16Tokens (8), not 1..4.
  Dot4Fn x16_q4_k = nullptr;
  GemmTileFn gemm16_q4_k = nullptr;
  GemmTileFn gemm16_q6_k = nullptr;  // Q6_K x16 (q6k_x16.h), as gemm16_q4_k
  Unpack16Fn unpack16_q4_k = nullptr, unpack16_q6_k = nullptr;  // set with gemm16_q4_k / _q6_k
  Gemm16ValuesFn gemm16_values_q4_k = nullptr, gemm16_values_q6_k = nullptr;
  // The table's 16-row Q6_K kernels read the linear arrangement (q6k_x16.h BlockQ6Kx16Linear;
  // the 256-bit tables), else the split one (BlockQ6Kx16; AVX-512).
  bool q6k_x16_linear = false;
  // gemm16_values_q4_k on AMX tiles for n_tok 1..kAmxTokens (16), on the values
  // unpack16_q4_k_amx writes (kAmxValueBytesPerColumn per column), adding into out (from 0,
  // each token's outputs are those of gemm16_values_q4_k bit for bit; the super-blocks of a row
  // may come in consecutive calls); only in the "avx512-amx" table.
  Unpack16Fn unpack16_q4_k_amx = nullptr;
  Gemm16ValuesFn gemm16_values_q4_k_amx = nullptr;
  GemmTileFn gemm16_q5_1 = nullptr;  // Q5_1 x16 (q0_x16.h) against Q8_1 activations
  GemmTileFn gemm16ForType(TensorType weight) const;  // Q4_K / Q6_K / Q5_1 x16; nullptr when none
  // Q8_0: AVX-512; Q4_0, Q5_0: every x86 table.
  Gemm16Q0Fn gemm16_q8_0 = nullptr, gemm16_q4_0 = nullptr, gemm16_q5_0 = nullptr;
  Gemm16Q0Fn gemm16Q0ForType(TensorType weight) const;  // nullptr when none
  Gemm32Q0Fn gemm32_q4_0 = nullptr;  // AVX-512: Q4_0 prefill on two groups at once
  Gemm32Q0Fn gemm32Q0ForType(TensorType weight) const;  // nullptr when none
  // Q5_0 prefill over more tokens than one tile, each group unpacked once: the 256-bit and
  // AVX-512 tables (Q4_0 measured level on the 256-bit ones: its nibbles take two operations per
  // weight vector).
  Unpack16Fn unpack16_q5_0 = nullptr;
  Gemm16ValuesQ0Fn gemm16_values_q5_0 = nullptr;
  Gemm32ValuesQ0Fn gemm32_values_q5_0 = nullptr;                    // AVX-512: two groups at once
  Gemm32ValuesQ0Fn gemm32ValuesQ0ForType(TensorType weight) const;  // nullptr when none
  Unpack16Fn unpack16Q0ForType(TensorType weight) const;            // nullptr when none
  Gemm16ValuesQ0Fn gemm16ValuesQ0ForType(TensorType weight) const;  // nullptr when none
  Gemv16Fn gemv16_q8_0 = nullptr, gemv16_q4_0 = nullptr, gemv16_q5_0 = nullptr;  // as gemm16_*
  Gemv16Fn gemv16_q4_k = nullptr, gemv16_q6_k = nullptr;
  Gemv16Fn gemv16ForType(TensorType weight) const;               // nullptr when none
  GemmRowsFn gemm_rows_f16 = nullptr, gemm_rows_bf16 = nullptr;  // nullptr when none
  GemmRowsFn gemmRowsForType(TensorType weight) const;           // nullptr when none
  // y[i] = x[i] rounded to F16 (as quantizeRow) and widened back to F32: the F16 tile's
  // activations. Set wherever gemm_rows_f16 is.
  QuantizeFn round_f16 = nullptr;
  AxpyFn f32_axpy = nullptr;                              // every table has one
  QuantizeFn quantize_q8_k = nullptr;                     // every table has one
  QuantizeFn quantize_q8_0 = nullptr;                     // every table has one (n % 32 == 0)
  GemmTileFn gemmForType(TensorType weight) const;        // nullptr when none
  GemmPanelFn gemm_panel_q8_0 = nullptr;                  // nullptr when none
  GemmPanelFn gemmPanelForType(TensorType weight) const;  // nullptr when none
  // x4_q8_0 for a matrix without a -128 weight (Matrix::q8_no_min): the products taken as
  // |activation| x (weight signed like the activation), one sign operation per block for the
  // 4 rows instead of two per row; the same integers, so the same bits. nullptr when none.
  Dot4Fn x4_q8_0_no_min = nullptr;
  DotFn forType(TensorType weight) const;  // TP_CHECK on an unsupported type
  // nullptr when none; q8_no_min (Matrix::q8_no_min): x4_q8_0_no_min where the table has one.
  Dot4Fn x4ForType(TensorType weight, bool q8_no_min = false) const;
};

// Rewrites groups of 4 rows (rows % 4 == 0) so that block b of row r of a group lies at block
// index b * 4 + r: the 4-row kernels then read one sequential stream.
void interleaveRows4(TensorType type, uint8_t* data, int64_t rows, int64_t cols);

TensorType activationType(TensorType weight);

const DotKernels& scalarKernels();
const DotKernels* avx2Kernels();      // nullptr when the CPU lacks AVX2+FMA+F16C
const DotKernels* avx2VnniKernels();  // nullptr when it also lacks AVX-VNNI (VEX vpdpbusd)
const DotKernels* avx512Kernels();    // nullptr when the CPU lacks AVX-512 F/BW/VL/VNNI
// avx512Kernels() with AMX-INT8 prefill tiles; nullptr when the CPU lacks AMX-TILE / AMX-INT8 or
// the OS does not let this process use them.
const DotKernels* avx512AmxKernels();
const DotKernels& bestKernels();

// The software prefetch of the decode kernels on the 16-row layouts (gemv16_*). kNearAndFar: the
// weight lines of Q4_0, Q5_0, Q4_K and Q6_K fetched into L2 a few KiB ahead and into the outer
// caches further ahead, Q8_0's not at all; kNearOnly: every type's lines fetched into L2 12 KiB
// ahead; kFarKQuants: Q4_K and Q6_K near and far at shorter distances, Q4_0 and Q5_0 into L2 12
// KiB ahead only, Q8_0 not at all. Chosen once per process from the CPU (AMD Zen 5 and later:
// kFarKQuants; other AMD with AVX-512: kNearAndFar; others: kNearOnly; the measurements are in
// dot_x86_gemv16.inc and decode_prefetch.h); setDecodePrefetch() overrides it (tools/kernel_bench
// compares them; never while kernels run). Prefetching never changes a result.
enum class DecodePrefetch { kNearAndFar, kNearOnly, kFarKQuants };
DecodePrefetch decodePrefetch();
void setDecodePrefetch(DecodePrefetch choice);

}  // namespace tpnode::model::kernels
