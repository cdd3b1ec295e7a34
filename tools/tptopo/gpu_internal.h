// Shared by the CUDA check files (gpu_*.cc; compiled only in CUDA builds): error handling,
// RAII owners of device memory, pinned memory and streams, and event timing.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "tools/tptopo/report.h"
#include "tools/tptopo/topo_options.h"

namespace tpnode::tptopo::gpu {

// "cudaErrorNoDevice: no CUDA-capable device is detected".
inline std::string describe(cudaError_t err) {
  return std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
}

// Thrown inside the CUDA check files only; caught per check and turned into a failed check.
struct CudaFailure {
  std::string what;
};

inline void check(cudaError_t err, const char* call) {
  if (err != cudaSuccess) throw CudaFailure{std::string(call) + ": " + describe(err)};
}

// Device memory on `device`, freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer(int device, size_t bytes) : device_(device), bytes_(bytes) {
    check(cudaSetDevice(device), "cudaSetDevice");
    check(cudaMalloc(&ptr_, bytes), "cudaMalloc");
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) {
      cudaSetDevice(device_);
      cudaFree(ptr_);
    }
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  size_t size() const { return bytes_; }

 private:
  int device_;
  size_t bytes_;
  void* ptr_ = nullptr;
};

// Pinned (page-locked) host memory, usable with every device (portable), freed on destruction.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(size_t bytes) : bytes_(bytes) {
    check(cudaHostAlloc(&ptr_, bytes, cudaHostAllocPortable), "cudaHostAlloc");
  }
  ~PinnedBuffer() {
    if (ptr_ != nullptr) cudaFreeHost(ptr_);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void* get() const { return ptr_; }
  size_t size() const { return bytes_; }

 private:
  size_t bytes_;
  void* ptr_ = nullptr;
};

// A stream on `device`, destroyed on destruction.
class Stream {
 public:
  explicit Stream(int device) : device_(device) {
    check(cudaSetDevice(device), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  ~Stream() {
    if (stream_ != nullptr) {
      cudaSetDevice(device_);
      cudaStreamDestroy(stream_);
    }
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
};

// Times `body` (which enqueues work on `stream`) `reps` times with CUDA events after one
// warm-up run; the median in microseconds. The current device must be the stream's (events
// are created on the current device, and recording one on another device's stream fails).
template <typename Body>
double medianUs(cudaStream_t stream, int reps, Body&& body) {
  struct Events {
    cudaEvent_t start = nullptr, stop = nullptr;
    ~Events() {
      if (start != nullptr) cudaEventDestroy(start);
      if (stop != nullptr) cudaEventDestroy(stop);
    }
  } ev;
  check(cudaEventCreate(&ev.start), "cudaEventCreate");
  check(cudaEventCreate(&ev.stop), "cudaEventCreate");
  body();
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  std::vector<double> us;
  for (int r = 0; r < reps; ++r) {
    check(cudaEventRecord(ev.start, stream), "cudaEventRecord");
    body();
    check(cudaEventRecord(ev.stop, stream), "cudaEventRecord");
    check(cudaEventSynchronize(ev.stop), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, ev.start, ev.stop), "cudaEventElapsedTime");
    us.push_back(static_cast<double>(ms) * 1e3);
  }
  std::sort(us.begin(), us.end());
  return us.empty() ? 0.0 : us[us.size() / 2];
}

// A known pattern: word i of a buffer tagged `seed`.
inline uint32_t patternWord(uint32_t seed, size_t i) {
  return static_cast<uint32_t>(i) * 2654435761u ^ (seed * 40503u + 0x9e3779b9u);
}

// The per-area checks; each fills its part of host.cuda and appends its checks.
void listDevices(HostReport& host);                               // gpu_devices.cc
void checkP2p(const TopoOptions& options, HostReport& host);      // gpu_p2p.cc
void checkStaging(const TopoOptions& options, HostReport& host);  // gpu_staging.cc
void checkNccl(const TopoOptions& options, HostReport& host);     // gpu_nccl.cc / _none.cc
std::string ncclVersion();                                        // gpu_nccl.cc / _none.cc

}  // namespace tpnode::tptopo::gpu
