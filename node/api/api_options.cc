#include "node/api/api_options.h"

#include <algorithm>
#include <fstream>

#include <boost/asio/ip/address.hpp>

#include "common/error.h"

namespace tpnode::node::api {

std::vector<std::string> loadApiKeys(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(ErrorCode::kInvalidArgument, "--api-key-file {}: cannot read it", path);
  std::vector<std::string> keys;
  std::string line;
  while (std::getline(in, line)) {
    size_t b = line.find_first_not_of(" \t\r");
    size_t e = line.find_last_not_of(" \t\r");
    if (b == std::string::npos || line[b] == '#') continue;
    keys.push_back(line.substr(b, e - b + 1));
  }
  if (keys.empty()) {
    fail(ErrorCode::kInvalidArgument, "--api-key-file {}: holds no key (one key per line)", path);
  }
  return keys;
}

RequestDefaults requestDefaultsFrom(const Options& o) {
  RequestDefaults d;
  auto given = [&o](const char* flag) { return o.given.count(flag) > 0; };
  SamplingOptions& s = d.sampling;
  if (given("temp")) s.temperature = o.temperature;
  if (given("top-k")) s.top_k = o.top_k;
  if (given("top-p")) s.top_p = o.top_p;
  if (given("min-p")) s.min_p = o.min_p;
  if (given("repeat-penalty")) s.repeat_penalty = o.repeat_penalty;
  if (given("seed")) s.seed = o.seed;
  if (given("n-predict")) {
    if (o.n_predict < 1) {
      fail(ErrorCode::kInvalidArgument,
           "-n/--n-predict {} cannot be the API's default max_tokens; give at least 1",
           o.n_predict);
    }
    d.max_tokens = o.n_predict;
  }
  if (s.temperature < 0 || s.temperature > 2 || s.top_p < 0 || s.top_p > 1 || s.top_k < 0 ||
      s.min_p < 0 || s.min_p > 1 || s.repeat_penalty < 0.01 || s.repeat_penalty > 10) {
    fail(ErrorCode::kInvalidArgument,
         "the sampling flags must lie where the API accepts them: --temp 0..2, --top-p 0..1, "
         "--top-k >= 0, --min-p 0..1, --repeat-penalty 0.01..10");
  }
  return d;
}

bool exposedWithoutKey(const ApiOptions& o) {
  if (!o.api_keys.empty() || o.host == "localhost") return false;
  boost::system::error_code ec;
  auto address = boost::asio::ip::make_address(o.host, ec);
  return ec || !address.is_loopback();
}

size_t defaultMaxConnections(int slots) {
  return std::max<size_t>(64, 8 * static_cast<size_t>(std::max(1, slots)));
}

std::chrono::milliseconds redisTimeoutFrom(const Options& o) {
  if (!(o.redis_timeout_s > 0) || o.redis_timeout_s > 60) {
    fail(ErrorCode::kInvalidArgument, "--redis-timeout {} must be in (0, 60] seconds",
         o.redis_timeout_s);
  }
  return std::chrono::milliseconds(
      std::max<int64_t>(1, static_cast<int64_t>(o.redis_timeout_s * 1000 + 0.5)));
}

ApiOptions apiOptionsFrom(const Options& o) {
  ApiOptions a;
  a.host = o.host;
  if (o.port < 0 || o.port > 65535) {
    fail(ErrorCode::kInvalidArgument, "--port {} is not a TCP port (0..65535)", o.port);
  }
  a.port = static_cast<uint16_t>(o.port);
  for (const std::string& key : o.api_keys) {
    if (key.empty()) fail(ErrorCode::kInvalidArgument, "--api-key is empty");
    a.api_keys.push_back(key);
  }
  if (!o.api_key_file.empty()) {
    for (std::string& key : loadApiKeys(o.api_key_file)) a.api_keys.push_back(std::move(key));
  }
  if (o.api_tls_cert.empty() != o.api_tls_key.empty()) {
    fail(ErrorCode::kInvalidArgument, "--api-tls-cert and --api-tls-key go together; give both");
  }
  a.tls_cert_file = o.api_tls_cert;
  a.tls_key_file = o.api_tls_key;
  if (o.api_max_body < 1024) {
    fail(ErrorCode::kInvalidArgument, "--api-max-body {} is too small (at least 1024 bytes)",
         o.api_max_body);
  }
  a.max_body_bytes = o.api_max_body;
  a.defaults = requestDefaultsFrom(o);
  if (o.max_connections < 0 || o.max_connections > 1'000'000) {
    fail(ErrorCode::kInvalidArgument, "--max-connections {} must be in 1..1000000 (0: default)",
         o.max_connections);
  }
  a.max_connections = o.max_connections > 0 ? static_cast<size_t>(o.max_connections)
                                            : defaultMaxConnections(o.parallel);
  if (o.max_tap_requests < 0) {
    fail(ErrorCode::kInvalidArgument, "--max-tap-requests {} must be >= 0 (0: taps refused)",
         o.max_tap_requests);
  }
  a.max_tap_requests = o.max_tap_requests;
  a.max_tap_bytes = o.max_tap_bytes;
  if (!o.responses_store_redis_url.empty()) {
    a.responses_redis =
        redis::parseRedisUrl(o.responses_store_redis_url, "--responses-store-redis-url");
  }
  if (o.responses_store_ttl_s < 1) {
    fail(ErrorCode::kInvalidArgument, "--responses-store-ttl {} must be at least 1 (seconds)",
         o.responses_store_ttl_s);
  }
  a.responses_ttl = std::chrono::seconds(o.responses_store_ttl_s);
  a.redis_timeout = redisTimeoutFrom(o);
  a.responses_max_bytes = o.responses_store_max_bytes;
  return a;
}

}  // namespace tpnode::node::api
