#include "node/driver_metrics.h"

#include "node/rank_set.h"

namespace tpnode::node {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::Registry;

prometheus::Counter& counter(Registry& r, const char* name, const char* help) {
  return BuildCounter().Name(name).Help(help).Register(r).Add({});
}

prometheus::Gauge& gauge(Registry& r, const char* name, const char* help) {
  return BuildGauge().Name(name).Help(help).Register(r).Add({});
}

prometheus::ClientMetric sample(double value, bool is_counter,
                                std::vector<prometheus::ClientMetric::Label> labels) {
  prometheus::ClientMetric m;
  m.label = std::move(labels);
  (is_counter ? m.counter.value : m.gauge.value) = value;
  return m;
}

}  // namespace

DriverMetrics::DriverMetrics(int nodes, int self)
    : registry_(std::make_shared<Registry>()),
      ready(gauge(*registry_, "tpnode_cluster_ready", "1 when every node is connected and loaded")),
      steps(counter(*registry_, "tpnode_steps_total", "Forward steps run")),
      overlapped_steps(counter(*registry_, "tpnode_pipeline_overlapped_steps_total",
                               "Pipeline steps begun while another step was in flight")),
      generated_tokens(
          counter(*registry_, "tpnode_engine_generated_tokens_total", "Tokens sampled")),
      prompt_tokens(
          counter(*registry_, "tpnode_engine_prompt_tokens_total", "Prompt tokens evaluated")),
      requests_failed(counter(*registry_, "tpnode_requests_failed_total",
                              "Requests failed by a cluster fault")),
      faults(counter(*registry_, "tpnode_cluster_faults_total", "Cluster faults (a node lost)")),
      step_ms(gauge(*registry_, "tpnode_step_ms", "Duration of the last forward step (ms)")),
      tensor_reads(counter(*registry_, "tpnode_tensor_reads_total",
                           "Tensors gathered for GET /v1/tensors/{name}")),
      tensor_read_ms(
          gauge(*registry_, "tpnode_tensor_read_ms", "Duration of the last tensor gather (ms)")),
      tap_requests(counter(*registry_, "tpnode_tap_requests_total",
                           "Requests that asked for activation taps")),
      running(gauge(*registry_, "tpnode_sequences_running", "Sequences in the running batch")),
      waiting(gauge(*registry_, "tpnode_sequences_waiting", "Sequences waiting for a slot")),
      kv_blocks_total(gauge(*registry_, "tpnode_kv_blocks_total", "KV cache blocks per rank")),
      kv_blocks_free(gauge(*registry_, "tpnode_kv_blocks_free",
                           "KV cache blocks free for new tokens (unused or cached, evictable)")),
      kv_blocks_cached(
          gauge(*registry_, "tpnode_kv_blocks_cached", "KV cache blocks in the prefix index")),
      prefix_lookups(counter(*registry_, "tpnode_prefix_cache_lookups_total",
                             "Requests that looked for a cached prompt prefix")),
      prefix_hits(counter(*registry_, "tpnode_prefix_cache_hits_total",
                          "Requests that reused a cached prompt prefix")),
      prefix_cached_tokens(counter(*registry_, "tpnode_prefix_cache_cached_tokens_total",
                                   "Prompt tokens reused from the prefix cache (not prefilled)")),
      kv_preemptions(counter(*registry_, "tpnode_kv_preemptions_total",
                             "Sequences preempted (to recompute later) for want of KV blocks")),
      kv_evictions(counter(*registry_, "tpnode_kv_evictions_total",
                           "Cached KV blocks evicted (LRU) to hold new tokens")),
      kv_redis_fetched(
          counter(*registry_, "tpnode_kv_redis_blocks_fetched_total",
                  "KV blocks loaded from the Redis tier on every rank (not prefilled)")),
      kv_redis_fetch_failures(
          counter(*registry_, "tpnode_kv_redis_fetch_failures_total",
                  "KV blocks asked of the Redis tier that some rank could not load (recomputed)")),
      rank_weight_bytes_(BuildGauge()
                             .Name("tpnode_rank_weight_bytes")
                             .Help("Weight bytes of each local rank's shard")
                             .Register(*registry_)),
      rank_kv_bytes_(BuildGauge()
                         .Name("tpnode_rank_kv_bytes")
                         .Help("KV cache bytes of each local rank")
                         .Register(*registry_)),
      rank_device_bytes_(BuildGauge()
                             .Name("tpnode_rank_device_bytes")
                             .Help("Bytes each GPU rank holds on its device (0: CPU rank)")
                             .Register(*registry_)),
      node_lost_(BuildCounter()
                     .Name("tpnode_node_lost_total")
                     .Help("Times node `peer` was declared lost (it died, went silent or did not "
                           "answer a step within --step-timeout)")
                     .Register(*registry_)),
      rank_expert_pairs_(BuildCounter()
                             .Name("tpnode_rank_expert_pairs_total")
                             .Help("Mixture of experts: token-expert pairs routed to the experts "
                                   "each global rank holds (all of them in part under expert "
                                   "slicing), summed over layers")
                             .Register(*registry_)),
      links_(nodes),
      self_(self) {
  for (int p = 0; p < nodes; ++p) {
    if (p != self) node_lost_.Add({{"peer", std::to_string(p)}});
  }
}

void DriverMetrics::nodeLost(int peer) {
  if (peer == self_ || peer < 0 || peer >= links_.size()) return;
  node_lost_.Add({{"peer", std::to_string(peer)}}).Increment();
}

void DriverMetrics::setRanks(const RankSet& rs) {
  for (int r = 0; r < rs.localRanks(); ++r) {
    const prometheus::Labels labels = {{"local_rank", std::to_string(r)},
                                       {"backend", rs.rankBackend(r)}};
    rank_weight_bytes_.Add(labels).Set(static_cast<double>(rs.rankWeightBytes(r)));
    rank_kv_bytes_.Add(labels).Set(static_cast<double>(rs.rankKvBytes(r)));
    rank_device_bytes_.Add(labels).Set(static_cast<double>(rs.rankDeviceBytes(r)));
  }
}

void DriverMetrics::addExpertLoad(const std::vector<uint64_t>& load) {
  if (load.size() != expert_pairs_seen_.size()) expert_pairs_seen_.assign(load.size(), 0);
  for (size_t r = 0; r < load.size(); ++r) {
    if (load[r] < expert_pairs_seen_[r]) expert_pairs_seen_[r] = 0;  // a new session
    const uint64_t delta = load[r] - expert_pairs_seen_[r];
    expert_pairs_seen_[r] = load[r];
    rank_expert_pairs_.Add({{"rank", std::to_string(r)}}).Increment(static_cast<double>(delta));
  }
}

std::vector<prometheus::MetricFamily> DriverMetrics::linkFamilies() const {
  using prometheus::MetricType;
  prometheus::MetricFamily bytes{"tpnode_link_bytes_total",
                                 "Bytes node 0's collectives (all-reduce, all-gather) moved on "
                                 "the mesh link to each node, by direction",
                                 MetricType::Counter,
                                 {}};
  prometheus::MetricFamily messages{"tpnode_link_messages_total",
                                    "Messages node 0's collectives sent to or received from "
                                    "each node",
                                    MetricType::Counter,
                                    {}};
  prometheus::MetricFamily wait{"tpnode_link_wait_seconds_total",
                                "Seconds node 0's collectives spent blocked sending to or "
                                "waiting for each node (a slow host stands out)",
                                MetricType::Counter,
                                {}};
  for (int p = 0; p < links_.size(); ++p) {
    if (p == self_) continue;
    const mesh::LinkMeter& m = links_.peer(p);
    const std::string peer = std::to_string(p);
    bytes.metric.push_back(sample(static_cast<double>(m.bytes_sent.load()), true,
                                  {{"direction", "sent"}, {"peer", peer}}));
    bytes.metric.push_back(sample(static_cast<double>(m.bytes_received.load()), true,
                                  {{"direction", "received"}, {"peer", peer}}));
    messages.metric.push_back(
        sample(static_cast<double>(m.messages.load()), true, {{"peer", peer}}));
    wait.metric.push_back(
        sample(static_cast<double>(m.wait_ns.load()) * 1e-9, true, {{"peer", peer}}));
  }
  return {bytes, messages, wait};
}

void DriverMetrics::setTierTally(std::shared_ptr<const KvTierTally> tally) {
  std::lock_guard lock(tier_mu_);
  tier_tally_ = std::move(tally);
}

void DriverMetrics::setTierReport(const TierReport& report) {
  if (static_cast<int>(report.node) == self_) return;
  std::lock_guard lock(tier_mu_);
  worker_tiers_[static_cast<int>(report.node)] = report.ranks;
}

std::vector<prometheus::MetricFamily> DriverMetrics::tierFamilies() const {
  using prometheus::MetricType;
  std::map<int, std::vector<RankTierCounters>> by_node;
  {
    std::lock_guard lock(tier_mu_);
    if (!tier_tally_ && worker_tiers_.empty()) return {};
    by_node = worker_tiers_;
    if (tier_tally_) by_node[self_] = tier_tally_->snapshot();
  }
  prometheus::MetricFamily stored{"tpnode_kv_redis_blocks_stored_total",
                                  "KV block shards each rank wrote to the Redis tier",
                                  MetricType::Counter,
                                  {}};
  prometheus::MetricFamily dropped{"tpnode_kv_redis_store_dropped_total",
                                   "KV block shards each rank did not write to the Redis tier "
                                   "(writer queue full, Redis down or slow)",
                                   MetricType::Counter,
                                   {}};
  for (const auto& [node, ranks] : by_node) {
    for (const RankTierCounters& rc : ranks) {
      std::vector<prometheus::ClientMetric::Label> labels = {{"node", std::to_string(node)},
                                                             {"rank", std::to_string(rc.rank)}};
      stored.metric.push_back(sample(static_cast<double>(rc.counters.stored), true, labels));
      dropped.metric.push_back(
          sample(static_cast<double>(rc.counters.store_dropped), true, std::move(labels)));
    }
  }
  return {stored, dropped};
}

std::vector<prometheus::MetricFamily> DriverMetrics::collect() const {
  std::vector<prometheus::MetricFamily> out = registry_->Collect();
  std::vector<prometheus::MetricFamily> links = linkFamilies();
  out.insert(out.end(), links.begin(), links.end());
  std::vector<prometheus::MetricFamily> tier = tierFamilies();
  out.insert(out.end(), tier.begin(), tier.end());
  return out;
}

}  // namespace tpnode::node
