// Verify-by-reduction: the one self-test of an all-reduce, shared by every check that proves a
// transport before it is used (the GPU transports' startup checks in collectives/cuda, the
// cluster check of tools/tptopo) and by the unit tests.
//
// Each rank fills its buffer with a known pattern (verifyValue: small integers, so every sum of
// up to millions of ranks is exact in f32 whatever the summation order), runs the all-reduce
// under test, and compares every element with the expected sum over all ranks
// (verifyExpected). The comparison is bit-exact by default; a tolerance may be given for paths
// that round (lossy wire formats).
//
// Contract
// - Pure host code: the reduction is a callback on a host span. A device path uploads the span,
//   reduces on the device, downloads the result into the same span and returns once it is there
//   (collectives/cuda/device_verify.h: verifyOnDevice).
// - The helpers never throw for a wrong value: they return a VerifyResult. An exception thrown by
//   the reduction (a peer lost, a CUDA error) propagates.
// - Every rank of a group must run the same checks with the same counts (the reduction is a
//   collective); a rank that stops at its first failure would leave the others waiting, so
//   callers run every count and keep the first failure.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string>

#include "collectives/communicator.h"

namespace tpnode::collectives {

// What a verification found.
struct VerifyResult {
  bool ok = true;
  size_t count = 0;  // elements compared
  size_t index = 0;  // the first wrong element (meaningful when !ok)
  float got = 0.0f;
  float want = 0.0f;

  // "element 17 of 1000 is 3, want 5" (or "correct").
  std::string describe() const;
};

// Rank `rank`'s known value at element i: an integer in [-30, 30].
float verifyValue(int rank, size_t i);
// The sum of verifyValue over ranks 0..ranks-1 at element i (exact in f32).
float verifyExpected(int ranks, size_t i);

void fillVerifyPattern(int rank, std::span<float> data);
// Compares data with verifyExpected(ranks, ·): bit for bit when tolerance is 0, else
// |got - want| <= tolerance (a NaN always fails).
VerifyResult checkVerifyPattern(int ranks, std::span<const float> data, float tolerance = 0.0f);

// The reduction under test, in place on a host span of `count` floats.
using HostReduceFn = std::function<void(std::span<float> data)>;

// Fills `count` floats with rank's pattern, reduces them with `reduce`, checks the result.
VerifyResult verifyByReduction(int rank, int ranks, size_t count, const HostReduceFn& reduce,
                               float tolerance = 0.0f);

// verifyByReduction through comm.allReduceSum (f32), with comm's rank and size.
VerifyResult verifyAllReduce(Communicator& comm, size_t count, float tolerance = 0.0f);

}  // namespace tpnode::collectives
