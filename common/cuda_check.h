// TP_CUDA(call): runs a CUDA runtime call and turns a failure into tpnode::Error naming the
// call, the CUDA error and where it happened. Include only from code built with CUDA.
//
// Codes: cudaErrorMemoryAllocation -> kResource (out of device memory: lower --ctx, --slots or
// use a larger --tp); cudaErrorNoDevice / cudaErrorInvalidDevice -> kResource; everything else
// -> kInternal (a bug or a broken device).
#pragma once

#include <cuda_runtime.h>

#include "common/error.h"

namespace tpnode {

[[noreturn]] inline void cudaFail(cudaError_t err, const char* call, const char* file, int line) {
  const ErrorCode code = (err == cudaErrorMemoryAllocation || err == cudaErrorNoDevice ||
                          err == cudaErrorInvalidDevice || err == cudaErrorInsufficientDriver)
                             ? ErrorCode::kResource
                             : ErrorCode::kInternal;
  fail(code, "CUDA call {} failed: {} ({}) at {}:{}", call, cudaGetErrorString(err),
       cudaGetErrorName(err), file, line);
}

}  // namespace tpnode

#define TP_CUDA(call)                                              \
  do {                                                             \
    const cudaError_t tp_cuda_err_ = (call);                       \
    if (tp_cuda_err_ != cudaSuccess) {                             \
      ::tpnode::cudaFail(tp_cuda_err_, #call, __FILE__, __LINE__); \
    }                                                              \
  } while (0)
