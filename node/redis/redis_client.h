// RedisClient: one connection to a Redis server (hiredis's protocol parser and command
// formatter, our own socket I/O with deadlines), for caches that must degrade, never hang.
//
// Contract
// - Thread-safe: calls are serialized on one connection by a mutex (a caller that wants
//   parallel round trips holds several clients). The client owns its hiredis context (RAII).
// - Nothing is done in the constructor; the first call connects. Every call is bounded by
//   `timeout` for the connect (and login) and again for the whole command (send + reply): a
//   slow or silent server costs at most that, never a hang.
// - Failures throw tpnode::Error, which the caller handles by falling back (recompute, serve
//   from memory): kIo (cannot connect, connection lost, or down and waiting out its backoff:
//   such calls fail at once without touching the network), kTimeout, kInvalidData (a malformed
//   reply, one of an unexpected type, or one larger than `max_reply_bytes`: received bytes are
//   hostile, memory stays bounded), kAuth (AUTH refused), kResource (the server answered an
//   error, e.g. OOM at maxmemory). After kIo, kTimeout or kInvalidData the connection is
//   dropped; the next call reconnects, with a backoff from `backoff_min` doubling to
//   `backoff_max` while connecting fails. Failures are logged at most once per 5 s (with a
//   count), recovery once.
// - Values and keys are binary-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "common/log.h"
#include "common/mutex.h"
#include "node/redis/redis_url.h"

namespace tpnode::node::redis {

struct RedisClientOptions {
  RedisEndpoint endpoint;
  std::chrono::milliseconds timeout{500};  // connect + login, then each command
  size_t max_reply_bytes = size_t{64} << 20;
  std::chrono::milliseconds backoff_min{100};
  std::chrono::milliseconds backoff_max{5000};
  std::string name = "redis";  // in log lines: "[redis kv-cache] ..."
};

class RedisClient {
 public:
  explicit RedisClient(RedisClientOptions options);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // GET: the value, or nullopt when the key does not exist (or expired).
  std::optional<std::string> get(std::string_view key);
  // GETs of several keys in one round trip (pipelined); one entry per key, in order.
  std::vector<std::optional<std::string>> getMany(std::span<const std::string> keys);
  // EXISTS of several keys in one round trip (pipelined); one entry per key, in order.
  std::vector<bool> existsMany(std::span<const std::string> keys);
  // SET key value [EX ttl]; ttl 0: no expiry.
  void set(std::string_view key, std::string_view value, std::chrono::seconds ttl);
  // DEL: whether the key existed.
  bool del(std::string_view key);
  // PING (connects if needed).
  void ping();

  const RedisClientOptions& options() const { return options_; }
  // Successful connects after the first (for metrics and tests).
  uint64_t reconnects() const;

 private:
  struct Connection;
  using Args = std::vector<std::string_view>;
  // One reply (our commands never get arrays: an array reply is kInvalidData).
  struct Value {
    enum class Kind { kNil, kString, kInteger, kStatus, kError } kind = Kind::kNil;
    std::string text;  // string, status or error
    long long integer = 0;
  };

  // Sends the commands (pipelined) and reads one reply each; connects first when needed.
  // Throws as above; an error reply is returned, not thrown.
  std::vector<Value> run(std::span<const Args> commands);
  std::vector<Value> exchangeLocked(std::span<const Args> commands,
                                    std::chrono::steady_clock::time_point deadline)
      TP_REQUIRES(mu_);
  static void expectOk(const Value& v, std::string_view what);
  void ensureConnectedLocked() TP_REQUIRES(mu_);
  void connectLocked() TP_REQUIRES(mu_);
  [[noreturn]] void dropAndThrowLocked(const Error& e) TP_REQUIRES(mu_);
  void logFailure(const Error& e);

  const RedisClientOptions options_;
  mutable Mutex mu_;
  std::unique_ptr<Connection> conn_ TP_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point next_attempt_ TP_GUARDED_BY(mu_){};
  std::chrono::milliseconds backoff_ TP_GUARDED_BY(mu_){0};
  bool failing_ TP_GUARDED_BY(mu_) = false;  // the last attempt failed (recovery is logged)
  uint64_t connects_ TP_GUARDED_BY(mu_) = 0;
  LogLimiter log_limiter_;
};

}  // namespace tpnode::node::redis
