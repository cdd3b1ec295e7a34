// TP_NCCL(call): runs an NCCL call and turns a failure into tpnode::Error naming the call, the
// NCCL error and where it happened. Include only from code built with NCCL.
#pragma once

#include <nccl.h>

#include "common/error.h"

namespace tpnode {

[[noreturn]] inline void ncclFail(ncclResult_t res, const char* call, const char* file, int line) {
  const ErrorCode code = res == ncclInvalidUsage || res == ncclInvalidArgument
                             ? ErrorCode::kUnsupported
                             : ErrorCode::kInternal;
  fail(code, "NCCL call {} failed: {} ({}) at {}:{}", call, ncclGetErrorString(res),
       static_cast<int>(res), file, line);
}

}  // namespace tpnode

#define TP_NCCL(call)                                              \
  do {                                                             \
    const ncclResult_t tp_nccl_res_ = (call);                      \
    if (tp_nccl_res_ != ncclSuccess) {                             \
      ::tpnode::ncclFail(tp_nccl_res_, #call, __FILE__, __LINE__); \
    }                                                              \
  } while (0)
