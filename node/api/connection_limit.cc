#include "node/api/connection_limit.h"

#include <sys/socket.h>

namespace tpnode::node::api {

std::unique_ptr<ConnectionLimit::Slot> ConnectionLimit::admit(int fd, bool* retry) {
  std::lock_guard lock(mu_);
  *retry = false;
  if (live_ >= max_ && entries_.size() >= 2 * max_) {
    *retry = true;  // evicted connections are still closing
    return nullptr;
  }
  if (live_ >= max_) {
    // Evict the connection idle longest, if any; else refuse.
    Entry* oldest = nullptr;
    for (auto& [id, e] : entries_) {
      if (e.idle && !e.evicted && (oldest == nullptr || e.idle_since < oldest->idle_since)) {
        oldest = &e;
      }
    }
    if (oldest == nullptr) return nullptr;
    ::shutdown(oldest->fd, SHUT_RDWR);
    oldest->evicted = true;
    --live_;
    ++evicted_;
  }
  const uint64_t id = next_id_++;
  entries_[id] = Entry{fd, /*idle=*/true, false, Clock::now()};  // nothing read from it yet
  ++live_;
  return std::unique_ptr<Slot>(new Slot(*this, id));
}

ConnectionLimit::Slot::~Slot() {
  std::lock_guard lock(limit_.mu_);
  auto it = limit_.entries_.find(id_);
  if (it == limit_.entries_.end()) return;
  if (!it->second.evicted) --limit_.live_;
  limit_.entries_.erase(it);
}

void ConnectionLimit::Slot::setIdle(bool idle) {
  std::lock_guard lock(limit_.mu_);
  auto it = limit_.entries_.find(id_);
  if (it == limit_.entries_.end() || it->second.idle == idle) return;
  it->second.idle = idle;
  if (idle) it->second.idle_since = Clock::now();
}

size_t ConnectionLimit::open() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

uint64_t ConnectionLimit::evicted() const {
  std::lock_guard lock(mu_);
  return evicted_;
}

}  // namespace tpnode::node::api
