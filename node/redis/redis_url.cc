#include "node/redis/redis_url.h"

#include <charconv>

#include <fmt/format.h>

#include "common/error.h"

namespace tpnode::node::redis {
namespace {

constexpr int kMaxDb = 1 << 20;

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percentDecode(std::string_view s, std::string_view what, const char* part) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    int hi = i + 2 < s.size() ? hexDigit(s[i + 1]) : -1;
    int lo = i + 2 < s.size() ? hexDigit(s[i + 2]) : -1;
    if (hi < 0 || lo < 0) {
      fail(ErrorCode::kInvalidArgument, "{}: the {} has a '%' not followed by two hex digits", what,
           part);
    }
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

int parseNumber(std::string_view text, int lo, int hi, std::string_view what, const char* part) {
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi) {
    fail(ErrorCode::kInvalidArgument, "{}: the {} '{}' is not an integer in {}..{}", what, part,
         text, lo, hi);
  }
  return v;
}

// "[user]:password@" at the front of `rest`, removed from it.
void takeCredentials(std::string_view& rest, RedisEndpoint& e, std::string_view what) {
  size_t at = rest.rfind('@');
  if (at == std::string_view::npos) return;
  std::string_view cred = rest.substr(0, at);
  rest.remove_prefix(at + 1);
  size_t colon = cred.find(':');
  if (colon == std::string_view::npos) {
    // redis://password@host is a common mistake for redis://:password@host: take it as the
    // password rather than a user without one.
    e.password = percentDecode(cred, what, "password");
    return;
  }
  e.user = percentDecode(cred.substr(0, colon), what, "user");
  e.password = percentDecode(cred.substr(colon + 1), what, "password");
}

void parseTcp(std::string_view rest, RedisEndpoint& e, std::string_view what) {
  size_t slash = rest.find('/');
  std::string_view hostport = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    std::string_view db = rest.substr(slash + 1);
    if (!db.empty()) e.db = parseNumber(db, 0, kMaxDb, what, "database number");
  }
  std::string_view port;
  if (!hostport.empty() && hostport.front() == '[') {
    size_t close = hostport.find(']');
    if (close == std::string_view::npos) {
      fail(ErrorCode::kInvalidArgument, "{}: an IPv6 host misses its ']'", what);
    }
    e.host = std::string(hostport.substr(1, close - 1));
    std::string_view after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') fail(ErrorCode::kInvalidArgument, "{}: junk after ']'", what);
      port = after.substr(1);
      if (port.empty()) fail(ErrorCode::kInvalidArgument, "{}: an empty port after ':'", what);
    }
  } else {
    size_t colon = hostport.find(':');
    e.host = std::string(hostport.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = hostport.substr(colon + 1);
      if (port.empty()) fail(ErrorCode::kInvalidArgument, "{}: an empty port after ':'", what);
    }
  }
  if (e.host.empty()) fail(ErrorCode::kInvalidArgument, "{}: no host (redis://host:port)", what);
  if (!port.empty()) e.port = static_cast<uint16_t>(parseNumber(port, 1, 65535, what, "port"));
}

void parseUnix(std::string_view rest, RedisEndpoint& e, std::string_view what) {
  size_t q = rest.find('?');
  e.path = std::string(rest.substr(0, q));
  if (e.path.empty() || e.path.front() != '/') {
    fail(ErrorCode::kInvalidArgument, "{}: unix:// takes an absolute socket path (unix:///path)",
         what);
  }
  if (q == std::string_view::npos) return;
  std::string_view query = rest.substr(q + 1);
  if (query.substr(0, 3) != "db=") {
    fail(ErrorCode::kInvalidArgument, "{}: the only query parameter is db=N", what);
  }
  e.db = parseNumber(query.substr(3), 0, kMaxDb, what, "database number");
}

}  // namespace

std::string RedisEndpoint::describe() const {
  if (unix_socket) return db == 0 ? "unix://" + path : fmt::format("unix://{}?db={}", path, db);
  const bool v6 = host.find(':') != std::string::npos;
  return fmt::format("redis://{}{}{}:{}/{}", v6 ? "[" : "", host, v6 ? "]" : "", port, db);
}

RedisEndpoint parseRedisUrl(std::string_view url, std::string_view what) {
  RedisEndpoint e;
  std::string_view rest = url;
  if (rest.substr(0, 8) == "redis://") {
    rest.remove_prefix(8);
    takeCredentials(rest, e, what);
    parseTcp(rest, e, what);
  } else if (rest.substr(0, 7) == "unix://") {
    rest.remove_prefix(7);
    e.unix_socket = true;
    takeCredentials(rest, e, what);
    parseUnix(rest, e, what);
  } else {
    size_t scheme = url.find("://");
    fail(ErrorCode::kInvalidArgument,
         "{}: '{}' is not redis://[:password@]host[:port][/db] or unix:///path (TLS, rediss://, "
         "is not supported)",
         what,
         scheme == std::string_view::npos ? std::string("no scheme")
                                          : std::string(url.substr(0, scheme + 3)));
  }
  return e;
}

}  // namespace tpnode::node::redis
