#include "node/redis/redis_url.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace tpnode::node::redis {
namespace {

TEST(RedisUrlTest, TcpForms) {
  RedisEndpoint e = parseRedisUrl("redis://cache.local");
  EXPECT_FALSE(e.unix_socket);
  EXPECT_EQ(e.host, "cache.local");
  EXPECT_EQ(e.port, 6379);
  EXPECT_EQ(e.db, 0);
  EXPECT_TRUE(e.password.empty());

  e = parseRedisUrl("redis://:s%40cret@127.0.0.1:6380/3");
  EXPECT_EQ(e.host, "127.0.0.1");
  EXPECT_EQ(e.port, 6380);
  EXPECT_EQ(e.db, 3);
  EXPECT_EQ(e.password, "s@cret");
  EXPECT_TRUE(e.user.empty());
  EXPECT_EQ(e.describe(), "redis://127.0.0.1:6380/3");  // no password

  e = parseRedisUrl("redis://alice:pw@[::1]:7000/");
  EXPECT_EQ(e.host, "::1");
  EXPECT_EQ(e.port, 7000);
  EXPECT_EQ(e.user, "alice");
  EXPECT_EQ(e.password, "pw");
  EXPECT_EQ(e.describe(), "redis://[::1]:7000/0");
}

TEST(RedisUrlTest, UnixSocket) {
  RedisEndpoint e = parseRedisUrl("unix:///run/redis/redis.sock?db=2");
  EXPECT_TRUE(e.unix_socket);
  EXPECT_EQ(e.path, "/run/redis/redis.sock");
  EXPECT_EQ(e.db, 2);
  EXPECT_EQ(e.describe(), "unix:///run/redis/redis.sock?db=2");
}

TEST(RedisUrlTest, BadUrlsNameTheSettingAndNeverThePassword) {
  for (const char* bad : {"", "http://x", "rediss://x:1", "redis://", "redis://:pw@:6379",
                          "redis://h:0", "redis://h:65536", "redis://h:12ab", "redis://h:",
                          "redis://h/x", "redis://h/-1", "redis://[::1", "redis://[::1]x",
                          "unix://relative.sock", "unix:///s?x=1", "redis://:bad%zzpass@h"}) {
    try {
      parseRedisUrl(bad, "--kv-cache-redis-url");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("--kv-cache-redis-url"), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find("zzpass"), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find(":pw"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace tpnode::node::redis
