// RedisEndpoint: where a Redis server is and how to log in, parsed from a URL:
//   redis://[[user]:password@]host[:port][/db]     (port 6379, db 0 by default)
//   unix://[[user]:password@]/path/to/redis.sock[?db=N]
// IPv6 hosts go in brackets (redis://[::1]:6379). A password may carry %XX escapes.
//
// Contract: pure functions of their arguments; parseRedisUrl() throws Error(kInvalidArgument)
// naming `what` (the setting, e.g. "--kv-cache-redis-url") and what is wrong, never echoing
// the password. describe() leaves the password out, so it is safe to log.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tpnode::node::redis {

struct RedisEndpoint {
  bool unix_socket = false;
  std::string host;  // tcp: name or address (without brackets)
  uint16_t port = 6379;
  std::string path;  // unix: the socket file
  std::string user;  // empty: AUTH with the password alone (the "default" user)
  std::string password;
  int db = 0;  // SELECT db (0..(1 << 20))

  // "redis://host:port/db" or "unix:///path?db=N", without credentials.
  std::string describe() const;
};

RedisEndpoint parseRedisUrl(std::string_view url, std::string_view what = "redis URL");

}  // namespace tpnode::node::redis
