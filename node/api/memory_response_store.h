// MemoryResponseStore: the Responses API's store in this process's memory, bounded: at most
// `max_bytes` of encoded entries and `max_entries` entries, the least recently used (put or
// read) dropped first. An entry larger than max_bytes is not kept. Thread-safe.
#pragma once

#include <cstdint>
#include <list>
#include <unordered_map>

#include "common/mutex.h"
#include "node/api/response_store.h"

namespace tpnode::node::api {

class MemoryResponseStore final : public ResponseStore {
 public:
  MemoryResponseStore(uint64_t max_bytes, size_t max_entries = 100000);

  void put(const StoredResponse& response) override;
  std::optional<StoredResponse> get(const std::string& id) override;
  bool remove(const std::string& id) override;
  std::string describe() const override;

  size_t size() const;
  uint64_t bytes() const;

 private:
  struct Entry {
    std::string id;
    std::string text;  // encodeStoredResponse
  };
  void evictLocked() TP_REQUIRES(mu_);

  const uint64_t max_bytes_;
  const size_t max_entries_;
  mutable Mutex mu_;
  std::list<Entry> lru_ TP_GUARDED_BY(mu_);  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_ TP_GUARDED_BY(mu_);
  uint64_t bytes_ TP_GUARDED_BY(mu_) = 0;
};

}  // namespace tpnode::node::api
