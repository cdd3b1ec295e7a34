// ScratchBuffer: a grow-only, pre-faulted byte buffer owned by one algorithm instance.
// Steady state allocates nothing: it grows only when a call needs more than any call before
// (size it up front with reserve() to avoid even that), and new memory is touched at once so
// that no collective pays first-touch page faults on its data path.
// Not thread-safe: one owner thread.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>

namespace tpnode::collectives {

class ScratchBuffer {
 public:
  // A 64-byte aligned region of at least `bytes` bytes; invalidates earlier pointers when it
  // grows.
  std::byte* reserve(size_t bytes) {
    if (bytes > capacity_) {
      const size_t grown = bytes > 2 * capacity_ ? bytes : 2 * capacity_;
      storage_ = std::make_unique<std::byte[]>(grown + 64);  // value-initialized: touched
      capacity_ = grown;
    }
    auto addr = reinterpret_cast<uintptr_t>(storage_.get());
    return storage_.get() + ((64 - addr % 64) % 64);
  }
  size_t capacity() const { return capacity_; }

 private:
  std::unique_ptr<std::byte[]> storage_;
  size_t capacity_ = 0;
};

}  // namespace tpnode::collectives
