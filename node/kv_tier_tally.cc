#include "node/kv_tier_tally.h"

namespace tpnode::node {

KvTierCounters& KvTierCounters::operator+=(const KvTierCounters& o) {
  stored += o.stored;
  store_dropped += o.store_dropped;
  fetched += o.fetched;
  fetch_failed += o.fetch_failed;
  return *this;
}

KvTierCounters KvTierTally::Cell::read() const {
  KvTierCounters c;
  c.stored = stored.load(std::memory_order_relaxed);
  c.store_dropped = store_dropped.load(std::memory_order_relaxed);
  c.fetched = fetched.load(std::memory_order_relaxed);
  c.fetch_failed = fetch_failed.load(std::memory_order_relaxed);
  return c;
}

KvTierTally::Cell& KvTierTally::cell(uint32_t global_rank) {
  std::lock_guard lock(mu_);
  std::unique_ptr<Cell>& c = cells_[global_rank];
  if (!c) c = std::make_unique<Cell>();
  return *c;
}

std::vector<RankTierCounters> KvTierTally::snapshot() const {
  std::lock_guard lock(mu_);
  std::vector<RankTierCounters> out;
  out.reserve(cells_.size());
  for (const auto& [rank, c] : cells_) out.push_back({rank, c->read()});
  return out;
}

}  // namespace tpnode::node
