// An emulated CUDA runtime: the subset collectives/cuda uses, on the CPU, so that the device
// collectives' logic (barriers, event ordering, chunking, self-tests, selection, the
// inter-node op) runs in CI without a GPU (device_comm_emulated_test, label unit).
// Device memory is host memory (so every "device" reaches every other); each stream is a worker
// thread that runs its queue in order, with random delays to shake out missing waits; events
// follow CUDA's rule that a wait applies to the most recent record at the time it is enqueued.
// It says nothing about real kernels, peer access or NCCL: device_comm_test on a GPU does.
// FAKE_CUDA_DEVICES (default 2) sets the device count.
#pragma once
#include <cstddef>
#include <functional>

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorNotReady = 600,
  cudaErrorPeerAccessAlreadyEnabled = 704,
};
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};
struct CUstream_st;
typedef CUstream_st* cudaStream_t;
struct CUevent_st;
typedef CUevent_st* cudaEvent_t;
#define cudaEventDisableTiming 2u
#define cudaStreamNonBlocking 1u

const char* cudaGetErrorString(cudaError_t);
const char* cudaGetErrorName(cudaError_t);
cudaError_t cudaGetLastError();
cudaError_t cudaGetDeviceCount(int*);
cudaError_t cudaGetDevice(int*);
cudaError_t cudaSetDevice(int);
cudaError_t cudaMalloc(void**, size_t);
cudaError_t cudaFree(void*);
cudaError_t cudaMallocHost(void**, size_t);
cudaError_t cudaFreeHost(void*);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t*, unsigned);
cudaError_t cudaEventDestroy(cudaEvent_t);
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t = nullptr);
cudaError_t cudaEventQuery(cudaEvent_t);
cudaError_t cudaEventSynchronize(cudaEvent_t);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t*, unsigned);
cudaError_t cudaStreamDestroy(cudaStream_t);
cudaError_t cudaStreamSynchronize(cudaStream_t);
cudaError_t cudaStreamQuery(cudaStream_t);
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned = 0);
cudaError_t cudaMemcpyAsync(void*, const void*, size_t, cudaMemcpyKind, cudaStream_t = nullptr);
cudaError_t cudaMemsetAsync(void*, int, size_t, cudaStream_t = nullptr);
cudaError_t cudaDeviceCanAccessPeer(int*, int, int);
cudaError_t cudaDeviceEnablePeerAccess(int, unsigned);
// Emulation only: run fn on the stream's worker (a "kernel" launch: the stream must belong to
// the current device); whether a kernel on the current device may read device memory at p
// (its own device's, or a peer's with peer access enabled).
cudaError_t fakeEnqueue(cudaStream_t, std::function<void()> fn);
bool fakeKernelCanRead(const void* p);
// Emulation only (fault injection, sum_kernel_emulated.cc): from `min_count` elements up, the
// add kernel adds 1 to the last element of its sum, as a transport that corrupts large messages
// would. 0 (the default) turns it off. TPNODE_FAKE_CUDA marks the emulated runtime.
#define TPNODE_FAKE_CUDA 1
void fakeCorruptSumsFrom(size_t min_count);
