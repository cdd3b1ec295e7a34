#include "model/host_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "common/error.h"

namespace tpnode::model {
namespace {

constexpr size_t kHuge = size_t{2} << 20;

}  // namespace

HostBuffer::HostBuffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  // Over-allocate to align the start to 2 MiB, then trim both ends.
  const size_t want = (bytes + kHuge - 1) / kHuge * kHuge;
  const size_t total = bytes >= kHuge ? want + kHuge : bytes;
  void* p = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    fail(ErrorCode::kResource, "cannot allocate {} bytes of host memory: {}", bytes,
         std::strerror(errno));
  }
  auto* base = static_cast<uint8_t*>(p);
  if (bytes < kHuge) {
    data_ = base;
    mapped_ = total;
    return;
  }
  uintptr_t addr = reinterpret_cast<uintptr_t>(base);
  uintptr_t aligned = (addr + kHuge - 1) / kHuge * kHuge;
  size_t head = aligned - addr, tail = total - head - want;
  if (head) ::munmap(base, head);
  if (tail) ::munmap(reinterpret_cast<uint8_t*>(aligned) + want, tail);
  data_ = reinterpret_cast<uint8_t*>(aligned);
  mapped_ = want;
#ifdef MADV_HUGEPAGE
  ::madvise(data_, mapped_, MADV_HUGEPAGE);  // advisory: ignore failure
#endif
}

HostBuffer::~HostBuffer() {
  release();
}

void HostBuffer::release() {
  if (data_) ::munmap(data_, mapped_);
  data_ = nullptr;
  size_ = mapped_ = 0;
}

HostBuffer::HostBuffer(HostBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      mapped_(std::exchange(o.mapped_, 0)) {}

HostBuffer& HostBuffer::operator=(HostBuffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    mapped_ = std::exchange(o.mapped_, 0);
  }
  return *this;
}

}  // namespace tpnode::model
