// Weight upload and release (kernels.h uploadMatrix/freeMatrix), the only place that allocates
// device memory. Q8_0 is split into quants and scales (layout.cuh kLayoutQ8Split); every other
// type is copied as its GGUF rows.
#include <vector>

#include "common/check.h"
#include "common/cuda_check.h"
#include "model/kernels/cuda/kernels.h"
#include "model/kernels/cuda/layout.cuh"

namespace tpnode::model::cuda {
namespace {

// Owns a cudaMalloc'ed buffer until release() hands it over.
class DeviceAlloc {
 public:
  explicit DeviceAlloc(size_t bytes) { TP_CUDA(cudaMalloc(&ptr_, bytes)); }
  ~DeviceAlloc() {
    if (ptr_) cudaFree(ptr_);
  }
  DeviceAlloc(const DeviceAlloc&) = delete;
  DeviceAlloc& operator=(const DeviceAlloc&) = delete;
  void* get() const { return ptr_; }
  void* release() {
    void* p = ptr_;
    ptr_ = nullptr;
    return p;
  }

 private:
  void* ptr_ = nullptr;
};

}  // namespace

bool supportsType(TensorType type) {
  return typeGeom(type).values != 0;
}

DeviceMatrix uploadMatrix(const Matrix& host) {
  if (!supportsType(host.type)) {
    fail(ErrorCode::kUnsupported, "the CUDA kernels do not run tensor type {} (GGUF id {})",
         typeName(host.type), static_cast<uint32_t>(host.type));
  }
  TP_CHECK(host.interleave == 1, "uploadMatrix needs plain rows, got interleave {}",
           host.interleave);
  TP_CHECK(host.rows > 0 && host.cols > 0, "uploadMatrix: empty matrix {}x{}", host.rows,
           host.cols);
  TP_CHECK(host.cols % typeGeom(host.type).values == 0, "uploadMatrix: {} columns of {}", host.cols,
           typeName(host.type));
  const auto row_bytes = static_cast<size_t>(plainRowBytes(host.type, host.cols));
  TP_CHECK(host.row_bytes == row_bytes, "uploadMatrix: row_bytes {} != {}", host.row_bytes,
           row_bytes);
  DeviceMatrix m;
  m.type = host.type;
  m.rows = host.rows;
  m.cols = host.cols;
  const size_t plain_bytes = row_bytes * static_cast<size_t>(host.rows);
  if (host.type == TensorType::kQ8_0) {
    std::vector<uint8_t> split(q8SplitBytes(host.rows, host.cols));
    packQ8Split(host.row(0), host.row_bytes, host.rows, host.cols, split.data());
    DeviceAlloc buf(split.size());
    TP_CUDA(cudaMemcpy(buf.get(), split.data(), split.size(), cudaMemcpyHostToDevice));
    // cudaMemcpy from pageable memory may return before the DMA lands; kernels on a
    // non-blocking stream would not wait for it.
    TP_CUDA(cudaStreamSynchronize(nullptr));
    m.layout = kLayoutQ8Split;
    m.bytes = split.size();
    m.data = buf.release();
  } else {
    DeviceAlloc buf(plain_bytes);
    TP_CUDA(cudaMemcpy(buf.get(), host.row(0), plain_bytes, cudaMemcpyHostToDevice));
    TP_CUDA(cudaStreamSynchronize(nullptr));
    m.layout = kLayoutPlain;
    m.bytes = plain_bytes;
    m.data = buf.release();
  }
  return m;
}

void freeMatrix(DeviceMatrix& m) {
  if (m.data) TP_CUDA(cudaFree(m.data));
  m = DeviceMatrix{};
}

}  // namespace tpnode::model::cuda
