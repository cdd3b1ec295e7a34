// For GPU tests (ctest label gpu): whether a CUDA device is usable, and the skip that every GPU
// test takes without one. The message is what tests/CMakeLists.txt's SKIP_REGULAR_EXPRESSION
// matches, so ctest lists such tests as skipped, never as passed.
#pragma once

#include <cuda_runtime.h>

namespace tpnode::testing_support {

inline bool haveCudaDevice() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no device" / "no driver" error
    return false;
  }
  return n > 0;
}

}  // namespace tpnode::testing_support

#define TP_SKIP_WITHOUT_CUDA_DEVICE()                   \
  do {                                                  \
    if (!::tpnode::testing_support::haveCudaDevice()) { \
      GTEST_SKIP() << "skipped: no CUDA device";        \
    }                                                   \
  } while (0)
