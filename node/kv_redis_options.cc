#include "node/kv_redis_options.h"

#include <fmt/format.h>

#include "common/error.h"
#include "node/api/api_options.h"

namespace tpnode::node {

std::optional<redis::KvBlockStoreOptions> kvBlockStoreOptionsFrom(const Options& o) {
  if (o.kv_cache_redis_url.empty()) return std::nullopt;
  redis::KvBlockStoreOptions k;
  k.endpoint = redis::parseRedisUrl(o.kv_cache_redis_url, "--kv-cache-redis-url");
  if (o.kv_cache_redis_ttl_s < 1) {
    fail(ErrorCode::kInvalidArgument, "--kv-cache-redis-ttl {} must be at least 1 (seconds)",
         o.kv_cache_redis_ttl_s);
  }
  k.ttl = std::chrono::seconds(o.kv_cache_redis_ttl_s);
  k.timeout = api::redisTimeoutFrom(o);
  return k;
}

std::optional<KvTierOptions> kvTierOptionsFrom(const Options& o, const LoadedModel& m, bool gpu) {
  std::optional<redis::KvBlockStoreOptions> store = kvBlockStoreOptionsFrom(o);
  if (!store) return std::nullopt;
  KvTierOptions t;
  t.store = *store;
  t.scope.model_identity = m.identity;
  t.scope.layout = m.topology.layout();
  t.scope.pp_stages = m.topology.stages();
  if (m.topology.pipelined()) {  // the layers of every stage, as --pp-layers spells them
    std::string layers;
    for (const model::LayerRange& r : m.stages.ranges) {
      layers += fmt::format("{}{}-{}", layers.empty() ? "" : ",", r.begin, r.end - 1);
    }
    t.scope.stage_layers = layers;
  }
  t.scope.block_tokens = o.kv_block_size;
  t.scope.cache_format = gpu ? kKvTierFormatGpu : kKvTierFormat;
  t.tally = std::make_shared<KvTierTally>();  // this process's ranks, across sessions
  return t;
}

void refuseKvRedisTier(const Options& o) {
  if (!kvBlockStoreOptionsFrom(o)) return;
  auto refuse = [](const char* why) {
    fail(ErrorCode::kUnsupported, "--kv-cache-redis-url: the Redis KV tier {}; remove the flag",
         why);
  };
  if (!o.prefixCacheOn()) refuse("stores and reuses prefix blocks: it needs --prefix-cache on");
}

}  // namespace tpnode::node
