// The bounded waits of cuda_resources.h: poll (spin, then yield) until done or the deadline.
#include "collectives/cuda/cuda_resources.h"

#include <thread>

#include "common/error.h"

namespace tpnode::collectives::cuda {

namespace {

// Polls `query` until it reports completion, at most `timeout`.
template <typename Query>
void pollUntilDone(Query query, const char* call, const char* what,
                   std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  for (int spins = 0;; ++spins) {
    const cudaError_t err = query();
    if (err == cudaSuccess) return;
    if (err != cudaErrorNotReady) cudaFail(err, call, __FILE__, __LINE__);
    (void)cudaGetLastError();  // "not ready" is no error: keep it out of the next check
    if (spins >= 1000) {
      if (std::chrono::steady_clock::now() - start > timeout) {
        fail(ErrorCode::kTimeout, "[coll] {} did not finish within {} ms", what, timeout.count());
      }
      std::this_thread::yield();
    }
  }
}

}  // namespace

void waitStream(cudaStream_t stream, const char* what, std::chrono::milliseconds timeout) {
  pollUntilDone([&] { return cudaStreamQuery(stream); }, "cudaStreamQuery", what, timeout);
}

void waitEvent(cudaEvent_t event, const char* what, std::chrono::milliseconds timeout) {
  pollUntilDone([&] { return cudaEventQuery(event); }, "cudaEventQuery", what, timeout);
}

}  // namespace tpnode::collectives::cuda
