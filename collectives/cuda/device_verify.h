// The device side of verify-by-reduction (collectives/verify.h) and the timing of a reduction:
// every self-test of the device ops (device_group.cc, inter_select.cc) goes through them.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>

#include "collectives/verify.h"

namespace tpnode::collectives::cuda {

using ReduceFn = std::function<void(float* data, size_t count, cudaStream_t stream)>;
// collectives/verify.h through device memory: uploads rank `rank`'s known pattern of `count`
// floats into `buf`, runs `reduce` on `stream`, downloads the result, waits for the stream
// (`what` names it in a timeout) and compares it bit for bit with the sum over `ranks` ranks.
// A wrong value is the result; a CUDA error or a failed reduction throws.
VerifyResult verifyOnDevice(const ReduceFn& reduce, int rank, int ranks, float* buf, size_t count,
                            cudaStream_t stream, const char* what);
// Median time of a reduction over `count` floats of `buf` (5 warm-up calls, 50 timed, each to
// the end of its stream work).
double medianReduceMicros(const ReduceFn& reduce, float* buf, size_t count, cudaStream_t stream);

}  // namespace tpnode::collectives::cuda
