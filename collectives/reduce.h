// Element-wise reduction kernels shared by every CPU algorithm (local group, inter-node).
//
// Numerics (the summation-order contract, see docs/collectives.md):
// - Every sum is accumulated in f32, in the order the sources are given, and rounded to the
//   buffer's dtype once at the end: dst[i] = round(((f32(s0[i]) + f32(s1[i])) + ...)).
//   For f32 the rounding is the identity, so f32 results depend only on the source order.
// - Float addition is commutative, so only the grouping (the order of sources) matters; the
//   callers fix it (rank order, node order, or the ring's hop order).
//
// Aliasing: dst may be the same memory as one of the sources at the same offset (in place);
// otherwise ranges must not overlap. No allocation; the accumulator lives on the stack.
#pragma once

#include <cstddef>
#include <span>

#include "collectives/communicator.h"

namespace tpnode::collectives {

// dst[i] = round(sum over k in order of srcs[k][i]) for i < count.
void reduceSum(void* dst, std::span<const void* const> srcs, size_t count, DType dtype);

// acc[i] = round(f32(acc[i]) + f32(src[i])). One hop of a ring: rounds after every hop.
void addInto(void* acc, const void* src, size_t count, DType dtype);

}  // namespace tpnode::collectives
