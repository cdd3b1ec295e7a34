#include "mesh/parked_pool.h"

namespace tpnode::mesh {

namespace {
constexpr size_t kMaxIdle = 32;
constexpr size_t kMaxIdleBytes = size_t{64} << 20;
}  // namespace

ParkedBuffer* ParkedPool::take(size_t size) {
  auto best = idle_.end();
  for (auto it = idle_.begin(); it != idle_.end(); ++it) {
    if ((*it)->capacity >= size && (best == idle_.end() || (*it)->capacity < (*best)->capacity)) {
      best = it;
    }
  }
  ParkedBuffer* p = nullptr;
  if (best != idle_.end()) {
    p = *best;
    idle_.erase(best);
  } else if (!idle_.empty()) {
    p = idle_.back();
    idle_.pop_back();
  } else {
    storage_.push_back(std::make_unique<ParkedBuffer>());
    p = storage_.back().get();
  }
  if (p->capacity < size) {
    p->data = std::make_unique_for_overwrite<std::byte[]>(size);
    p->capacity = size;
  }
  p->size = 0;
  p->ready = false;
  p->next = nullptr;
  return p;
}

void ParkedPool::recycle(ParkedBuffer* p) {
  if (idle_.size() >= kMaxIdle || p->capacity > kMaxIdleBytes) {
    p->data.reset();
    p->capacity = 0;
  }
  idle_.push_back(p);
}

}  // namespace tpnode::mesh
