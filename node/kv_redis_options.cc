#include "node/kv_redis_options.h"

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

void refuseKvRedisTier(const Options& o) {
  if (!kvBlockStoreOptionsFrom(o)) return;
  fail(ErrorCode::kUnsupported,
       "--kv-cache-redis-url: the Redis KV tier is not connected to the KV cache in this version "
       "(prefix blocks are reused within a cluster only, --prefix-cache); remove the flag");
}

}  // namespace tpnode::node
