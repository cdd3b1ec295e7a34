// cuda_gemv_bench [rows] [cols] [n_tokens]: the CUDA matmul (model/kernels/cuda) on one
// rows x cols matrix of every weight type (default 8192 x 2048, 1 token), 200 calls timed
// with CUDA events after a warm-up. Prints one JSON line per type with the weight bytes read
// per second (the GEMV is bound by them). Exits 0 with a message when there is no device.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "common/cuda_check.h"
#include "model/kernels/cpu/quantize.h"
#include "model/kernels/cuda/kernels.h"

namespace {

using tpnode::model::Matrix;
using tpnode::model::TensorType;
namespace cuda = tpnode::model::cuda;

constexpr int kWarmup = 20;
constexpr int kIters = 200;
constexpr int64_t kDistinctRows = 64;  // quantised once, repeated down the matrix

Matrix makeMatrix(TensorType type, int64_t rows, int64_t cols) {
  Matrix m;
  m.type = type;
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = tpnode::model::rowBytes(type, static_cast<uint64_t>(cols));
  m.data = tpnode::model::HostBuffer(m.row_bytes * static_cast<size_t>(rows));
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0, 1);
  std::vector<float> x(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* dst = m.data.data() + static_cast<size_t>(r) * m.row_bytes;
    if (r < kDistinctRows) {
      for (float& v : x) v = d(rng);
      tpnode::model::kernels::quantizeRow(type, x.data(), dst, cols);
    } else {
      std::copy_n(m.row(r % kDistinctRows), m.row_bytes, dst);
    }
  }
  return m;
}

template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) { TP_CUDA(cudaMalloc(&p_, n * sizeof(T) + 1)); }
  ~DeviceArray() { cudaFree(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() { return p_; }

 private:
  T* p_ = nullptr;
};

void benchType(TensorType type, int64_t rows, int64_t cols, int64_t n_tokens, cudaStream_t stream) {
  const Matrix host = makeMatrix(type, rows, cols);
  cuda::DeviceMatrix w = cuda::uploadMatrix(host);
  DeviceArray<float> x(static_cast<size_t>(n_tokens * cols)),
      y(static_cast<size_t>(n_tokens * rows));
  const std::vector<float> hx(static_cast<size_t>(n_tokens * cols), 0.01f);
  TP_CUDA(cudaMemcpy(x.get(), hx.data(), hx.size() * sizeof(float), cudaMemcpyHostToDevice));
  const size_t ws_bytes = cuda::matmulWorkspaceBytes(cols);
  DeviceArray<uint8_t> ws(ws_bytes);
  for (int i = 0; i < kWarmup; ++i) {
    cuda::matmul(w, x.get(), n_tokens, y.get(), rows, ws.get(), ws_bytes, stream);
  }
  cudaEvent_t start, stop;
  TP_CUDA(cudaEventCreate(&start));
  TP_CUDA(cudaEventCreate(&stop));
  TP_CUDA(cudaEventRecord(start, stream));
  for (int i = 0; i < kIters; ++i) {
    cuda::matmul(w, x.get(), n_tokens, y.get(), rows, ws.get(), ws_bytes, stream);
  }
  TP_CUDA(cudaEventRecord(stop, stream));
  TP_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  TP_CUDA(cudaEventElapsedTime(&ms, start, stop));
  TP_CUDA(cudaEventDestroy(start));
  TP_CUDA(cudaEventDestroy(stop));
  const double bytes = static_cast<double>(host.row_bytes) * static_cast<double>(rows);
  const double us = ms * 1e3 / kIters;
  std::printf(
      "{\"bench\":\"cuda_gemv\",\"type\":\"%s\",\"rows\":%lld,\"cols\":%lld,\"n_tokens\":%lld,"
      "\"iters\":%d,\"weight_bytes\":%.0f,\"us_per_call\":%.3f,\"gbps\":%.1f}\n",
      std::string(tpnode::model::tensorTypeName(type)).c_str(), static_cast<long long>(rows),
      static_cast<long long>(cols), static_cast<long long>(n_tokens), kIters, bytes, us,
      bytes / (us * 1e-6) / 1e9);
  std::fflush(stdout);
  cuda::freeMatrix(w);
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t rows = argc > 1 ? std::atoll(argv[1]) : 8192;
  const int64_t cols = argc > 2 ? std::atoll(argv[2]) : 2048;
  const int64_t n_tokens = argc > 3 ? std::atoll(argv[3]) : 1;
  if (rows <= 0 || cols <= 0 || cols % 256 != 0 || n_tokens <= 0) {
    std::fprintf(stderr, "usage: cuda_gemv_bench [rows] [cols, a multiple of 256] [n_tokens]\n");
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("cuda_gemv_bench: no CUDA device, nothing measured\n");
    return 0;
  }
  try {
    cudaStream_t stream;
    TP_CUDA(cudaStreamCreate(&stream));
    for (TensorType t : {TensorType::kQ8_0, TensorType::kQ4_K, TensorType::kQ6_K, TensorType::kQ4_0,
                         TensorType::kQ5_0, TensorType::kQ5_1, TensorType::kF16, TensorType::kBF16,
                         TensorType::kF32}) {
      benchType(t, rows, cols, n_tokens, stream);
    }
    TP_CUDA(cudaStreamDestroy(stream));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_gemv_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
