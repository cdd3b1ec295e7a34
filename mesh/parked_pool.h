// Buffers for frames that arrive before their receive is posted ("parked" by tag), reused
// from message to message so that parking does not allocate in steady state.
//
// Contract: not thread-safe; the owning Link calls it under its mutex. Buffers handed out by
// take() stay valid until given back with recycle() or the pool is destroyed. The pool keeps
// at most 32 idle buffers and frees idle buffers above 64 MiB.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace tpnode::mesh {

struct ParkedBuffer {
  std::unique_ptr<std::byte[]> data;
  size_t capacity = 0;
  size_t size = 0;     // bytes of the message (valid once ready)
  bool ready = false;  // the whole frame has been read into data
  ParkedBuffer* next = nullptr;
};

class ParkedPool {
 public:
  // A buffer of at least `size` bytes: the smallest idle one that fits, else a grown one.
  ParkedBuffer* take(size_t size);
  void recycle(ParkedBuffer* buffer);

 private:
  std::vector<std::unique_ptr<ParkedBuffer>> storage_;
  std::vector<ParkedBuffer*> idle_;
};

}  // namespace tpnode::mesh
