// RAII owners of the CUDA objects the device collectives use: device buffers, pinned host
// buffers, events, streams, and a guard that makes a device current for a scope.
//
// Contract
// - Constructors throw Error (TP_CUDA) on failure; destructors never throw (a failing free at
//   teardown is ignored: nothing useful can be done with it).
// - DeviceBuffer, Event and Stream remember their device and make it current while they are
//   created and destroyed, so they may be destroyed on any thread.
// - All types are move-only.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstddef>
#include <utility>

#include "common/cuda_check.h"

namespace tpnode::collectives::cuda {

// Makes `device` current for the scope; restores the previous device afterwards.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    TP_CUDA(cudaGetDevice(&previous_));
    if (previous_ != device) TP_CUDA(cudaSetDevice(device));
  }
  ~DeviceGuard() { (void)cudaSetDevice(previous_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

// `count` floats of device memory on `device`.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(int device, size_t count) : device_(device), count_(count) {
    DeviceGuard guard(device);
    void* p = nullptr;
    TP_CUDA(cudaMalloc(&p, count * sizeof(float)));
    ptr_ = static_cast<float*>(p);
  }
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      device_ = o.device_;
      count_ = std::exchange(o.count_, 0);
      ptr_ = std::exchange(o.ptr_, nullptr);
    }
    return *this;
  }
  float* get() const { return ptr_; }
  size_t count() const { return count_; }
  int device() const { return device_; }

 private:
  void reset() noexcept {
    if (ptr_ == nullptr) return;
    int previous = 0;
    (void)cudaGetDevice(&previous);
    (void)cudaSetDevice(device_);
    (void)cudaFree(ptr_);
    (void)cudaSetDevice(previous);
    ptr_ = nullptr;
  }
  int device_ = 0;
  size_t count_ = 0;
  float* ptr_ = nullptr;
};

// `count` floats of pinned (page-locked) host memory.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t count) : count_(count) {
    void* p = nullptr;
    TP_CUDA(cudaMallocHost(&p, count * sizeof(float)));
    ptr_ = static_cast<float*>(p);
  }
  ~PinnedBuffer() {
    if (ptr_ != nullptr) (void)cudaFreeHost(ptr_);
  }
  PinnedBuffer(PinnedBuffer&& o) noexcept
      : count_(std::exchange(o.count_, 0)), ptr_(std::exchange(o.ptr_, nullptr)) {}
  PinnedBuffer& operator=(PinnedBuffer&&) = delete;
  float* get() const { return ptr_; }
  size_t count() const { return count_; }

 private:
  size_t count_ = 0;
  float* ptr_ = nullptr;
};

// An event without timing on `device`.
class Event {
 public:
  explicit Event(int device) : device_(device) {
    DeviceGuard guard(device);
    TP_CUDA(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
  }
  ~Event() {
    if (event_ == nullptr) return;
    int previous = 0;
    (void)cudaGetDevice(&previous);
    (void)cudaSetDevice(device_);
    (void)cudaEventDestroy(event_);
    (void)cudaSetDevice(previous);
  }
  Event(Event&& o) noexcept : device_(o.device_), event_(std::exchange(o.event_, nullptr)) {}
  Event& operator=(Event&&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  int device_ = 0;
  cudaEvent_t event_ = nullptr;
};

// A non-blocking stream on `device`.
class Stream {
 public:
  explicit Stream(int device) : device_(device) {
    DeviceGuard guard(device);
    TP_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~Stream() {
    if (stream_ == nullptr) return;
    int previous = 0;
    (void)cudaGetDevice(&previous);
    (void)cudaSetDevice(device_);
    (void)cudaStreamSynchronize(stream_);
    (void)cudaStreamDestroy(stream_);
    (void)cudaSetDevice(previous);
  }
  Stream(Stream&& o) noexcept : device_(o.device_), stream_(std::exchange(o.stream_, nullptr)) {}
  Stream& operator=(Stream&&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
};

// Waits until everything enqueued on `stream` has finished, polling (spin, then yield), at
// most `timeout`: Error(kTimeout) naming `what` after it; a CUDA error throws as TP_CUDA.
// Never blocks forever, unlike cudaStreamSynchronize.
void waitStream(cudaStream_t stream, const char* what,
                std::chrono::milliseconds timeout = std::chrono::seconds(60));
// The same for one event (its most recent record).
void waitEvent(cudaEvent_t event, const char* what,
               std::chrono::milliseconds timeout = std::chrono::seconds(60));

}  // namespace tpnode::collectives::cuda
