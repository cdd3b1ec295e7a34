// RAII owners of CUDA memory: DeviceArray<T> (cudaMalloc on the current device) and
// PinnedArray<T> (cudaMallocHost). Move-only; the destructor frees (errors there are ignored:
// a destructor cannot report them and the process is then past caring). Resizing discards the
// contents. Include only from code built with CUDA.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "common/cuda_check.h"

namespace tpnode::model::cuda {

template <typename T, bool kPinned>
class CudaArray {
 public:
  CudaArray() = default;
  explicit CudaArray(size_t n) { resize(n); }
  ~CudaArray() { release(); }
  CudaArray(CudaArray&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  CudaArray& operator=(CudaArray&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  CudaArray(const CudaArray&) = delete;
  CudaArray& operator=(const CudaArray&) = delete;

  // Reallocates to n elements (contents discarded) when n differs from the current size.
  void resize(size_t n) {
    if (n == n_) return;
    release();
    if (n == 0) return;
    void* p = nullptr;
    if constexpr (kPinned) {
      TP_CUDA(cudaMallocHost(&p, n * sizeof(T)));
    } else {
      TP_CUDA(cudaMalloc(&p, n * sizeof(T)));
    }
    p_ = static_cast<T*>(p);
    n_ = n;
  }
  T* get() const { return p_; }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }

 private:
  void release() {
    if (p_ == nullptr) return;
    if constexpr (kPinned) {
      (void)cudaFreeHost(p_);
    } else {
      (void)cudaFree(p_);
    }
    p_ = nullptr;
    n_ = 0;
  }
  T* p_ = nullptr;
  size_t n_ = 0;
};

template <typename T>
using DeviceArray = CudaArray<T, false>;
template <typename T>
using PinnedArray = CudaArray<T, true>;

// Uploads a host vector (synchronously); an empty vector gives an empty array.
template <typename T, typename Vec>
DeviceArray<T> toDevice(const Vec& host) {
  DeviceArray<T> d(host.size());
  if (!host.empty()) {
    TP_CUDA(cudaMemcpy(d.get(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  return d;
}

}  // namespace tpnode::model::cuda
