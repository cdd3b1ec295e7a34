// DriverMetrics: node 0's engine-side Prometheus metrics (docs/api.md, "Metrics"), kept in a
// prometheus-cpp registry, plus the traffic of every mesh link as node 0's collectives see it
// (mesh/metered_mesh.h).
//
// Contract
// - Owned by the Driver; outlives every cluster session, so counters keep counting across
//   re-forms. The loop thread updates the counters and gauges (they are atomic); collect() may
//   run on any thread at the same time.
// - links() is handed to each session's MeteredMesh; its families are read from the meters at
//   collect() time: tpnode_link_bytes_total{peer,direction}, tpnode_link_messages_total{peer},
//   tpnode_link_wait_seconds_total{peer} (peer = node id).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include "mesh/metered_mesh.h"
#include "node/kv_tier_tally.h"
#include "node/step_progress.h"

namespace tpnode::node {

class RankSet;

class DriverMetrics {
  // Declared first: the references below point into it.
  std::shared_ptr<prometheus::Registry> registry_;

 public:
  // `nodes` in the cluster, `self` this node's id.
  DriverMetrics(int nodes, int self);

  prometheus::Gauge& ready;
  prometheus::Counter& steps;
  prometheus::Counter& overlapped_steps;
  prometheus::Counter& generated_tokens;
  prometheus::Counter& prompt_tokens;
  prometheus::Counter& requests_failed;
  prometheus::Counter& faults;
  prometheus::Gauge& step_ms;
  prometheus::Counter& tensor_reads;
  prometheus::Gauge& tensor_read_ms;
  prometheus::Counter& tap_requests;
  prometheus::Gauge& running;
  prometheus::Gauge& waiting;
  // Paged KV cache and prefix reuse (node/kv_blocks.h), set after each plan.
  prometheus::Gauge& kv_blocks_total;
  prometheus::Gauge& kv_blocks_free;
  prometheus::Gauge& kv_blocks_cached;
  prometheus::Counter& prefix_lookups;
  prometheus::Counter& prefix_hits;
  prometheus::Counter& prefix_cached_tokens;
  prometheus::Counter& kv_preemptions;
  prometheus::Counter& kv_evictions;
  // The Redis KV tier (--kv-cache-redis-url): blocks the cluster loaded on every rank and blocks
  // it asked for and recomputed. Every rank's blocks stored and dropped: setTier* below.
  prometheus::Counter& kv_redis_fetched;
  prometheus::Counter& kv_redis_fetch_failures;

  // Weight, KV and device bytes of each local rank (labels local_rank, backend).
  void setRanks(const RankSet& ranks);
  // Node `peer` was declared lost (dead, silent, or stalling a step): tpnode_node_lost_total.
  void nodeLost(int peer);
  // Mixture of experts, after each step (loop thread): tpnode_rank_expert_pairs_total{rank}
  // grows by the pairs routed to each global rank's experts since the last call (a new
  // session's RankSet counts from 0 again). `load`: ClusterSession::expertLoad() (in a
  // pipeline the ranks of stage s are numbered from s x ranks per stage).
  void addExpertLoad(const std::vector<uint64_t>& load);
  mesh::LinkMeters& links() { return links_; }
  // The Redis KV tier's block shards stored and dropped (queue full, SET failed) by every rank
  // of the cluster, read at collect() time: tpnode_kv_redis_blocks_stored_total{node,rank} and
  // tpnode_kv_redis_store_dropped_total{node,rank}: this node's ranks from `tally` (set once,
  // before the loop thread starts), the workers' from their latest TierReport (loop thread;
  // node/tier_counter_poll.h). Absent without the tier.
  void setTierTally(std::shared_ptr<const KvTierTally> tally);
  void setTierReport(const TierReport& report);

  std::vector<prometheus::MetricFamily> collect() const;

 private:
  std::vector<prometheus::MetricFamily> linkFamilies() const;
  std::vector<prometheus::MetricFamily> tierFamilies() const;

  prometheus::Family<prometheus::Gauge>& rank_weight_bytes_;
  prometheus::Family<prometheus::Gauge>& rank_kv_bytes_;
  prometheus::Family<prometheus::Gauge>& rank_device_bytes_;
  prometheus::Family<prometheus::Counter>& node_lost_;
  prometheus::Family<prometheus::Counter>& rank_expert_pairs_;
  std::vector<uint64_t> expert_pairs_seen_;  // loop thread only
  mesh::LinkMeters links_;
  const int self_;  // this node's id: no link to itself
  mutable std::mutex tier_mu_;
  std::shared_ptr<const KvTierTally> tier_tally_;              // guarded by tier_mu_
  std::map<int, std::vector<RankTierCounters>> worker_tiers_;  // guarded by tier_mu_; by node
};

}  // namespace tpnode::node
