#include "node/api/memory_response_store.h"

#include <fmt/format.h>

#include "common/error.h"

namespace tpnode::node::api {

MemoryResponseStore::MemoryResponseStore(uint64_t max_bytes, size_t max_entries)
    : max_bytes_(max_bytes), max_entries_(max_entries) {}

void MemoryResponseStore::evictLocked() {
  while (!lru_.empty() && (bytes_ > max_bytes_ || lru_.size() > max_entries_)) {
    bytes_ -= lru_.back().text.size();
    index_.erase(lru_.back().id);
    lru_.pop_back();
  }
}

void MemoryResponseStore::put(const StoredResponse& response) {
  std::string text = encodeStoredResponse(response);
  MutexLock lock(mu_);
  if (auto it = index_.find(response.id); it != index_.end()) {
    bytes_ -= it->second->text.size();
    lru_.erase(it->second);
    index_.erase(it);
  }
  if (text.size() > max_bytes_) return;  // never fits: not kept (GET answers 404)
  bytes_ += text.size();
  lru_.push_front(Entry{response.id, std::move(text)});
  index_[response.id] = lru_.begin();
  evictLocked();
}

std::optional<StoredResponse> MemoryResponseStore::get(const std::string& id) {
  std::string text;
  {
    MutexLock lock(mu_);
    auto it = index_.find(id);
    if (it == index_.end()) return std::nullopt;
    lru_.splice(lru_.begin(), lru_, it->second);
    text = it->second->text;
  }
  std::optional<StoredResponse> r = decodeStoredResponse(text, id);
  if (!r) throw Error(ErrorCode::kInternal, "a stored response does not decode");
  return r;
}

bool MemoryResponseStore::remove(const std::string& id) {
  MutexLock lock(mu_);
  auto it = index_.find(id);
  if (it == index_.end()) return false;
  bytes_ -= it->second->text.size();
  lru_.erase(it->second);
  index_.erase(it);
  return true;
}

std::string MemoryResponseStore::describe() const {
  return fmt::format("memory (at most {} bytes)", max_bytes_);
}

size_t MemoryResponseStore::size() const {
  MutexLock lock(mu_);
  return lru_.size();
}

uint64_t MemoryResponseStore::bytes() const {
  MutexLock lock(mu_);
  return bytes_;
}

}  // namespace tpnode::node::api
