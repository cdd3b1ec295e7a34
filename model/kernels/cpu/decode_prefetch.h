// The software prefetch of the CPU kernels on the 16-row layouts (q0_x16.h, q4k_x16.h,
// q6k_x16.h), shared by the AVX-512 kernels and the 256-bit ones: the prefill tiles' distance,
// the decode kernels' distances of each DecodePrefetch setting (dot.h) with the prefetch of a
// block's lines ahead. Only where the lines come from changes: never a result.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "model/kernels/cpu/dot.h"

namespace tpnode::model::kernels {

// Software prefetch distance of the prefill tiles: the hardware prefetcher alone left one core's
// weight stream at ~21 GB/s against ~26-30 GB/s read bandwidth; 6-10 KiB ahead measured best
// (kernel_bench).
constexpr int kPrefetchBytes = 6144;

// Each block's lines `near` bytes ahead into L2 (T1) and, unless `far` is 0, `far` bytes ahead
// into the outer caches (T2). Measured with tools/kernel_bench --model --prefetch (one copy of the
// weights, variants alternating):
// - near and far (AMD EPYC, Zen 4): the far prefetch took a llama-0.9b Q4_0 decode pass to
//   0.85-0.87x the time at one thread, a Q4_K_M one to 0.80-0.89x (0.93-0.96x at two); far at
//   12-32 KiB, or with T1, about the same; near at 2, 6 or 8 KiB or far at 16 or 32 KiB no faster
//   (Q4_0); no software prefetch 1.05-1.1x (Q5_0) to 1.6-1.8x (Q4_K_M) the time.
// - near only, 12 KiB (Intel Xeon, AVX-512 VNNI + AMX, 12 GB/s read per core): against near and
//   far, 0.93-0.95x the time per pass on Q4_K_M and 0.96-0.97x on Q4_0 at one thread, 0.93x and
//   0.97x at two; near at 4, 8 or 24 KiB within 3 %; no software prefetch 1.14-1.19x the time of
//   near and far.
// - near only, 12 KiB (AMD EPYC Zen 3, AVX2 only, 17-21 GB/s read per core): against near and
//   far, 0.91-0.95x the time per pass on Q4_0 and Q4_K_M at one thread, 0.81-0.82x on the 4-row
//   Q8_0 (which near and far leaves without prefetch); near at 8, 16, 20 or 28 KiB within the
//   VM's noise (medians within 3 %, alternating).
// - far for the K-quants only (AMD EPYC Zen 5, 39-41 GB/s read per core): with Q4_0's far
//   prefetch a llama-0.9b Q4_0 decode pass took 1.38x the time of plain loads of the same weights,
//   near only (4-24 KiB, or no software prefetch at all) 1.19-1.28x; on Q4_K_M near only at 4 or
//   12 KiB was no faster than near and far. tpnode --threads 1 decode, binaries alternating:
//   llama-0.9b Q4_0 54.0-57.0 -> 62.7-66.8 tokens/s, gemma-3-270m (Q5_0) 103-120 -> 121-133.
//   Q4_0 read as two streams side by side without software prefetch (as Q8_0) took 0.94-0.95x
//   the time per pass of one stream with the near prefetch at one thread (kernel_bench --model, one
//   process), but with two threads (four streams) tpnode's Q4_0 decode fell to 65.7-68.7 tokens/s
//   from 73.9-75.7 (tools/bench-model.sh, t2): not kept. Q4_K as two streams without prefetch took
//   1.4-1.8x the time of one stream with near and far. The K-quants' near and far at 3 and 12 KiB:
//   0.95-0.99x the time per llama-0.9b Q4_K_M pass of 6 and 24 KiB (6 runs in one process each),
//   gemma-3-270m level; at 1.5 and 6 KiB or 12 and 48 KiB no faster.
struct PrefetchDistances {
  int near_q0;  // Q4_0, Q5_0 (prefetchAhead)
  int far_q0;   // 0: none
  int near_k;   // Q4_K, Q6_K (prefetchBlock; the AVX2 decodes per line)
  int far_k;    // 0: none
  int near_q8;  // Q8_0 (0: none)
};

// The distances of this process's setting (read once per kernel call).
inline PrefetchDistances prefetchDistances() {
  switch (decodePrefetch()) {
    case DecodePrefetch::kNearOnly:
      return {12288, 0, 12288, 0, 12288};
    case DecodePrefetch::kFarKQuants:
      return {12288, 0, 3072, 12288, 0};
    case DecodePrefetch::kNearAndFar:
      break;
  }
  return {4096, 24576, kPrefetchBytes, 24576, 0};
}

// Prefetches with kHint the lines of [p, p + kBytes), unrolled.
template <size_t kBytes, auto kHint>
inline __attribute__((always_inline)) void prefetchLines(const char* p) {
#pragma GCC unroll 64
  for (size_t off = 0; off < kBytes; off += 64) _mm_prefetch(p + off, kHint);
}

// Prefetches with kHint the lines at p, p + 64, ... below p + kBytes, one per iteration of a loop
// written in assembly: its head aligned to 64 bytes (a jump over the padding) and one prefetch
// issued every two cycles at most (the address advances by two dependent adds). Compiled from C++,
// the same loop's speed depended on where the linker put it: the AVX-512 Q4_K decode read at
// 0.79-0.93x the rate of plain loads of the same bytes with its function at three of the four
// 16-byte offsets in a 64-byte line and at 1.01-1.04x at the fourth (kernel_bench --type q4_k,
// the kernels' object shifted by padding, AMD EPYC Zen 4), Q6_K's at 0.88-0.98x, and tpnode's
// llama-0.9b Q4_K_M decode moved between 44 and 55 tokens/s with it. This loop: Q4_K 0.93-1.01x
// at every offset (one measurement of 14 at 0.87x), Q6_K 0.97-0.99x; with one add of 64 (the pace
// set by the front end alone) Q4_K 0.93-0.98x.
template <size_t kBytes, auto kHint>
inline __attribute__((always_inline)) void prefetchLinesPaced(const char* p) {
  static_assert(kBytes > 0);
  static_assert(kHint == _MM_HINT_T1 || kHint == _MM_HINT_T2);
  const char* const end = p + kBytes;
#define TP_PACED_PREFETCH_LOOP(insn)                     \
  asm volatile("jmp 1f\n\t.p2align 6\n1:\n\t" insn       \
               " (%0)\n\tadd $32, %0\n\tadd $32, %0\n\t" \
               "cmp %1, %0\n\tjb 1b"                     \
               : "+r"(p)                                 \
               : "r"(end)                                \
               : "cc")
  if constexpr (kHint == _MM_HINT_T1) {
    TP_PACED_PREFETCH_LOOP("prefetcht1");
  } else {
    TP_PACED_PREFETCH_LOOP("prefetcht2");
  }
#undef TP_PACED_PREFETCH_LOOP
}

// Prefetches the lines of the kBytes at p `near` bytes ahead (T1) and, unless `far` is 0, `far`
// bytes ahead (T2): unrolled, or through prefetchLinesPaced (kPaced).
template <size_t kBytes, bool kPaced = false>
inline __attribute__((always_inline)) void prefetchNearFar(const void* p, int near, int far) {
  const char* c = static_cast<const char*>(p);
  if constexpr (kPaced) {
    prefetchLinesPaced<kBytes, _MM_HINT_T1>(c + near);
    if (far != 0) prefetchLinesPaced<kBytes, _MM_HINT_T2>(c + far);
  } else {
    prefetchLines<kBytes, _MM_HINT_T1>(c + near);
    if (far != 0) prefetchLines<kBytes, _MM_HINT_T2>(c + far);
  }
}

// The Q4_0 and Q5_0 decode kernels' prefetch of the kBytes at p (near_q0 and far_q0 ahead).
template <size_t kBytes, bool kPaced = false>
inline __attribute__((always_inline)) void prefetchAhead(const uint8_t* p,
                                                         const PrefetchDistances& pf) {
  prefetchNearFar<kBytes, kPaced>(p, pf.near_q0, pf.far_q0);
}

// The K-quant decode kernels' prefetch of the block of kBytes at xb (near_k and far_k ahead), one
// paced loop each at the block's start. Kept a loop: unrolled (a burst of 74 prefetches per Q4_K
// block) a llama-0.9b Q4_K_M decode pass took 1.2-1.3x the time on AMD EPYC (kernel_bench
// --model, binaries alternating), and with the prefetch spread over the block as it is read (a
// line per 64-byte chunk) Q4_K read at 0.75-0.84x the rate of plain loads (kernel_bench --type
// q4_k, every function offset). The AVX2 Q4_K and Q6_K decodes do spread the same lines over the
// block (its scale lines at the start, then a chunk's lines as it is reached: 1.05-1.23x and 1.11x
// the GB/s of the unpaced burst on AMD EPYC Zen 3; Q6_K only on its linear arrangement, level on
// the split one).
template <size_t kBytes>
inline __attribute__((always_inline)) void prefetchBlock(const void* xb,
                                                         const PrefetchDistances& pf) {
  prefetchNearFar<kBytes, /*kPaced=*/true>(xb, pf.near_k, pf.far_k);
}

}  // namespace tpnode::model::kernels
