#include "node/redis/redis_client.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <hiredis/hiredis.h>

#include "common/log.h"

namespace tpnode::node::redis {
namespace {

using Clock = std::chrono::steady_clock;

struct ContextDeleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
struct ReplyDeleter {
  void operator()(void* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<void, ReplyDeleter>;

// The reader's object functions with arrays refused: none of our commands answers one, and a
// hostile "*2147483647" must not allocate an element table.
void* refuseArray(const redisReadTask*, int) {
  return nullptr;  // the reader reports an out-of-memory error: kInvalidData below
}
redisReplyObjectFunctions* noArrayFunctions(const redisReplyObjectFunctions* defaults) {
  static redisReplyObjectFunctions fns = [defaults] {
    redisReplyObjectFunctions f = *defaults;
    f.createArray = refuseArray;
    return f;
  }();
  return &fns;
}

timeval toTimeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

// Waits until `fd` is ready for `events` or the deadline; false at the deadline.
bool waitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count() + 1, 1 << 30)));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return true;  // the send/recv that follows reports it
  }
}

std::string trimmed(std::string_view s) {
  constexpr size_t kMax = 200;
  return s.size() > kMax ? std::string(s.substr(0, kMax)) + "..." : std::string(s);
}

}  // namespace

struct RedisClient::Connection {
  std::unique_ptr<redisContext, ContextDeleter> ctx;
  int fd() const { return ctx->fd; }
};

RedisClient::RedisClient(RedisClientOptions options) : options_(std::move(options)) {}
RedisClient::~RedisClient() = default;

uint64_t RedisClient::reconnects() const {
  MutexLock lock(mu_);
  return connects_ > 0 ? connects_ - 1 : 0;
}

void RedisClient::logFailure(const Error& e) {
  if (auto held = log_limiter_.pass()) {
    spdlog::warn("[{}] {}: {}; calls fail (and callers fall back) until it answers again{}",
                 options_.name, options_.endpoint.describe(), e.what(), heldBackNote(*held));
  }
}

void RedisClient::dropAndThrowLocked(const Error& e) {
  conn_.reset();
  logFailure(e);
  throw e;
}

void RedisClient::connectLocked() {
  const RedisEndpoint& ep = options_.endpoint;
  const timeval tv = toTimeval(options_.timeout);
  std::unique_ptr<redisContext, ContextDeleter> ctx(
      ep.unix_socket ? redisConnectUnixWithTimeout(ep.path.c_str(), tv)
                     : redisConnectWithTimeout(ep.host.c_str(), ep.port, tv));
  if (!ctx) throw Error(ErrorCode::kResource, "cannot allocate a hiredis context");
  if (ctx->err) {
    throw Error(ErrorCode::kIo, fmt::format("cannot connect: {}", trimmed(ctx->errstr)));
  }
  const int flags = ::fcntl(ctx->fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(ctx->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    throw Error(ErrorCode::kIo, fmt::format("fcntl: {}", std::strerror(errno)));
  }
  ctx->reader->fn = noArrayFunctions(ctx->reader->fn);
  conn_ = std::make_unique<Connection>();
  conn_->ctx = std::move(ctx);
  // Login and database, within the same connect deadline.
  std::vector<Args> hello;
  if (!ep.password.empty()) {
    hello.push_back(ep.user.empty() ? Args{"AUTH", ep.password}
                                    : Args{"AUTH", ep.user, ep.password});
  }
  const std::string db = std::to_string(ep.db);
  if (ep.db != 0) hello.push_back(Args{"SELECT", db});
  hello.push_back(Args{"PING"});
  std::vector<Value> replies = exchangeLocked(hello, Clock::now() + options_.timeout);
  for (size_t i = 0; i < replies.size(); ++i) {
    if (replies[i].kind != Value::Kind::kError) continue;
    conn_.reset();
    const bool auth = !ep.password.empty() && i == 0;
    throw Error(auth ? ErrorCode::kAuth : ErrorCode::kIo,
                fmt::format("{} refused: {}", auth ? "AUTH" : "login", trimmed(replies[i].text)));
  }
}

void RedisClient::ensureConnectedLocked() {
  if (conn_) return;
  const auto now = Clock::now();
  if (failing_ && now < next_attempt_) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next_attempt_ - now);
    throw Error(ErrorCode::kIo, fmt::format("{} is unreachable; next attempt in {} ms",
                                            options_.endpoint.describe(), left.count()));
  }
  try {
    connectLocked();
  } catch (const Error& e) {
    conn_.reset();
    backoff_ = failing_ ? std::min(options_.backoff_max, backoff_ * 2) : options_.backoff_min;
    next_attempt_ = Clock::now() + backoff_;
    failing_ = true;
    logFailure(e);
    throw;
  }
  ++connects_;
  if (failing_) {
    spdlog::info("[{}] {}: connected again", options_.name, options_.endpoint.describe());
  }
  failing_ = false;
  backoff_ = std::chrono::milliseconds(0);
}

std::vector<RedisClient::Value> RedisClient::exchangeLocked(std::span<const Args> commands,
                                                            Clock::time_point deadline) {
  redisContext* c = conn_->ctx.get();
  std::string out;
  for (const Args& args : commands) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (std::string_view a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    char* cmd = nullptr;
    int n = redisFormatCommandArgv(&cmd, static_cast<int>(argv.size()), argv.data(), lens.data());
    if (n < 0 || !cmd) throw Error(ErrorCode::kResource, "cannot format a Redis command");
    out.append(cmd, static_cast<size_t>(n));
    redisFreeCommand(cmd);
  }
  size_t sent = 0;
  while (sent < out.size()) {
    ssize_t n = ::send(c->fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (!waitFor(c->fd, POLLOUT, deadline)) {
        throw Error(ErrorCode::kTimeout,
                    fmt::format("no room to send within {} ms", options_.timeout.count()));
      }
    } else {
      throw Error(ErrorCode::kIo, fmt::format("send: {}", std::strerror(errno)));
    }
  }
  std::vector<Value> replies;
  size_t received = 0;
  char buf[16384];
  while (replies.size() < commands.size()) {
    void* raw = nullptr;
    if (redisReaderGetReply(c->reader, &raw) != REDIS_OK) {
      throw Error(ErrorCode::kInvalidData,
                  fmt::format("a malformed reply ({})", trimmed(c->reader->errstr)));
    }
    if (raw) {
      ReplyPtr owner(raw);
      const auto* r = static_cast<const redisReply*>(raw);
      Value v;
      switch (r->type) {
        case REDIS_REPLY_NIL:
          break;
        case REDIS_REPLY_STRING:
        case REDIS_REPLY_STATUS:
        case REDIS_REPLY_ERROR:
          v.kind = r->type == REDIS_REPLY_STRING   ? Value::Kind::kString
                   : r->type == REDIS_REPLY_STATUS ? Value::Kind::kStatus
                                                   : Value::Kind::kError;
          v.text.assign(r->str, r->len);
          break;
        case REDIS_REPLY_INTEGER:
          v.kind = Value::Kind::kInteger;
          v.integer = r->integer;
          break;
        default:
          throw Error(ErrorCode::kInvalidData, fmt::format("a reply of type {}", r->type));
      }
      replies.push_back(std::move(v));
      continue;
    }
    ssize_t n = ::recv(c->fd, buf, sizeof buf, 0);
    if (n > 0) {
      received += static_cast<size_t>(n);
      if (received > options_.max_reply_bytes) {
        throw Error(ErrorCode::kInvalidData, fmt::format("a reply larger than the cap of {} bytes",
                                                         options_.max_reply_bytes));
      }
      if (redisReaderFeed(c->reader, buf, static_cast<size_t>(n)) != REDIS_OK) {
        throw Error(ErrorCode::kResource, "the reply parser ran out of memory");
      }
    } else if (n == 0) {
      throw Error(ErrorCode::kIo, "the server closed the connection");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      if (!waitFor(c->fd, POLLIN, deadline)) {
        throw Error(ErrorCode::kTimeout,
                    fmt::format("no reply within {} ms", options_.timeout.count()));
      }
    } else {
      throw Error(ErrorCode::kIo, fmt::format("recv: {}", std::strerror(errno)));
    }
  }
  return replies;
}

std::vector<RedisClient::Value> RedisClient::run(std::span<const Args> commands) {
  MutexLock lock(mu_);
  ensureConnectedLocked();
  try {
    return exchangeLocked(commands, Clock::now() + options_.timeout);
  } catch (const Error& e) {
    dropAndThrowLocked(e);  // the connection's state is unknown after any failure
  }
}

void RedisClient::expectOk(const Value& v, std::string_view what) {
  if (v.kind == Value::Kind::kError) {
    throw Error(ErrorCode::kResource,
                fmt::format("{}: the server answered {}", what, trimmed(v.text)));
  }
}

std::optional<std::string> RedisClient::get(std::string_view key) {
  const Args cmd{"GET", key};
  Value v = std::move(run(std::span(&cmd, 1))[0]);
  expectOk(v, "GET");
  if (v.kind == Value::Kind::kNil) return std::nullopt;
  if (v.kind != Value::Kind::kString) {
    throw Error(ErrorCode::kInvalidData, "GET: the reply is not a string");
  }
  return std::move(v.text);
}

std::vector<std::optional<std::string>> RedisClient::getMany(std::span<const std::string> keys) {
  std::vector<Args> cmds;
  for (const std::string& k : keys) cmds.push_back(Args{"GET", k});
  std::vector<Value> replies = run(cmds);
  std::vector<std::optional<std::string>> out;
  for (Value& v : replies) {
    expectOk(v, "GET");
    if (v.kind == Value::Kind::kNil) {
      out.emplace_back();
    } else if (v.kind == Value::Kind::kString) {
      out.emplace_back(std::move(v.text));
    } else {
      throw Error(ErrorCode::kInvalidData, "GET: the reply is not a string");
    }
  }
  return out;
}

void RedisClient::set(std::string_view key, std::string_view value, std::chrono::seconds ttl) {
  const std::string ex = std::to_string(ttl.count());
  const Args cmd = ttl.count() > 0 ? Args{"SET", key, value, "EX", ex} : Args{"SET", key, value};
  Value v = std::move(run(std::span(&cmd, 1))[0]);
  expectOk(v, "SET");
  if (v.kind != Value::Kind::kStatus) throw Error(ErrorCode::kInvalidData, "SET: not +OK");
}

std::vector<bool> RedisClient::existsMany(std::span<const std::string> keys) {
  std::vector<Args> cmds;
  for (const std::string& k : keys) cmds.push_back(Args{"EXISTS", k});
  std::vector<Value> replies = run(cmds);
  std::vector<bool> out;
  for (const Value& v : replies) {
    expectOk(v, "EXISTS");
    if (v.kind != Value::Kind::kInteger) {
      throw Error(ErrorCode::kInvalidData, "EXISTS: the reply is not an integer");
    }
    out.push_back(v.integer > 0);
  }
  return out;
}

bool RedisClient::del(std::string_view key) {
  const Args cmd{"DEL", key};
  Value v = std::move(run(std::span(&cmd, 1))[0]);
  expectOk(v, "DEL");
  if (v.kind != Value::Kind::kInteger) throw Error(ErrorCode::kInvalidData, "DEL: not an integer");
  return v.integer > 0;
}

void RedisClient::ping() {
  const Args cmd{"PING"};
  expectOk(run(std::span(&cmd, 1))[0], "PING");
}

}  // namespace tpnode::node::redis
