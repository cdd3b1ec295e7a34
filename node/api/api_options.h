// ApiOptions: how the HTTP API listens and what it accepts. Plain data; apiOptionsFrom() fills
// it from the process options (node/options.h) and reads the API key file.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "node/engine.h"
#include "node/options.h"
#include "node/redis/redis_url.h"

namespace tpnode::node::api {

// What a request that omits a field gets (docs/api.md, "Request fields"): the server's command
// line (--temp, --top-k, --top-p, --min-p, --repeat-penalty, --seed, -n) where it was given,
// as llama-server does, else OpenAI's defaults.
struct RequestDefaults {
  SamplingOptions sampling;                         // temperature 1, top_p 1, top_k off, no seed
  std::optional<int> max_tokens;                    // -n/--n-predict; none: the k...MaxTokens below
  static constexpr int kCompletionsMaxTokens = 16;  // OpenAI's default for completions
  static constexpr int kChatMaxTokens = 1024;       // chat (clamped to the room left)
};

struct ApiOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;               // 0: an ephemeral port (tests); ApiServer::port() tells which
  int io_threads = 2;                 // threads running the HTTP connections
  size_t max_body_bytes = 1 << 20;    // larger bodies get 413
  size_t max_header_bytes = 16384;    // larger headers get 431
  double read_timeout_s = 30;         // to receive one whole request (and keep-alive idle time)
  double write_timeout_s = 30;        // per write of a response or a streamed chunk
  std::vector<std::string> api_keys;  // empty: no authentication
  std::string tls_cert_file;          // both set: HTTPS only
  std::string tls_key_file;
  bool serve_ui = true;  // the chat page at /
  RequestDefaults defaults;
  // Open connections at most; at the cap the connection idle longest is closed to make room,
  // and a new connection is answered 503 when none is idle (apiOptionsFrom: --max-connections,
  // default defaultMaxConnections(--parallel)).
  size_t max_connections = 64;
  int max_tap_requests = 4;                    // requests with taps in flight at once (else 429)
  uint64_t max_tap_bytes = uint64_t{1} << 28;  // tap values in flight, 4 bytes each (else 429)
  // The Responses API's store (response_store.h): in Redis when set, else in memory.
  std::optional<redis::RedisEndpoint> responses_redis;
  std::chrono::seconds responses_ttl{2592000};
  std::chrono::milliseconds redis_timeout{500};
  uint64_t responses_max_bytes = uint64_t{64} << 20;    // the memory store's cap
  size_t responses_max_value_bytes = size_t{64} << 20;  // one stored response, at most
};

// True when the API would listen on a non-loopback address (or one that is not an IP address)
// without an API key: ApiServer::start() logs a warning then (docs/security.md).
bool exposedWithoutKey(const ApiOptions& options);

// The default --max-connections for `slots` sequence slots (--parallel): max(64, 8 x slots).
size_t defaultMaxConnections(int slots);

// Reads one key per line (blank lines and lines starting with '#' ignored; surrounding
// whitespace trimmed). Throws Error(kInvalidArgument) when the file cannot be read or holds no
// key.
std::vector<std::string> loadApiKeys(const std::string& path);

// From --host/--port/--api-key/--api-key-file/--api-tls-cert/--api-tls-key/--api-max-body/
// --max-connections/--max-tap-requests/--max-tap-bytes/--responses-store-*/--redis-timeout
// (a bad Redis URL is Error(kInvalidArgument) naming the flag), and the request defaults from the
// sampling flags the command line gave (Options::given).
ApiOptions apiOptionsFrom(const Options& options);
// --redis-timeout as a duration (at least 1 ms); Error(kInvalidArgument) outside (0, 60] s.
std::chrono::milliseconds redisTimeoutFrom(const Options& options);
// The RequestDefaults part; Error(kInvalidArgument) for a value the API would refuse.
RequestDefaults requestDefaultsFrom(const Options& options);

}  // namespace tpnode::node::api
