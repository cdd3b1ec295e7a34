// HostBuffer: an owned block of ordinary anonymous memory (mmap, not file-backed), 2 MiB
// aligned and advised for transparent huge pages when large, so streaming weights (or a KV
// cache) through the CPU does not miss the TLB on every 4 KiB page. Move-only; zero-filled on
// allocation.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tpnode::model {

class HostBuffer {
 public:
  HostBuffer() = default;
  explicit HostBuffer(size_t bytes);  // Error(kResource) when the OS refuses
  ~HostBuffer();
  HostBuffer(HostBuffer&& o) noexcept;
  HostBuffer& operator=(HostBuffer&& o) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void release();
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;
};

}  // namespace tpnode::model
