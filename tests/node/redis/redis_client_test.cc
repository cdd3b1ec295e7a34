// RedisClient against a real redis-server (started by the test on a loopback port) and against
// hostile servers: values round-trip byte for byte, TTLs expire, a server killed mid-run makes
// calls fail (bounded) and then recover, and oversized, malformed or missing replies are errors.
#include "node/redis/redis_client.h"

#include <gtest/gtest.h>

#include "tests/node/redis/hostile_server.h"
#include "tests/node/redis/redis_server.h"

namespace tpnode::node::redis {
namespace {

using namespace std::chrono_literals;
using test::HostileServer;
using test::RedisServer;

RedisClientOptions optionsFor(const RedisEndpoint& e, size_t cap = size_t{64} << 20) {
  RedisClientOptions o;
  o.endpoint = e;
  o.timeout = 500ms;
  o.max_reply_bytes = cap;
  o.backoff_min = 50ms;
  o.backoff_max = 200ms;
  o.name = "redis test";
  return o;
}

ErrorCode codeOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  ADD_FAILURE() << "no error";
  return ErrorCode::kInternal;
}

// Retries `f` until it does not throw, for at most 10 s; whether it succeeded.
bool eventually(const std::function<void()>& f) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      f();
      return true;
    } catch (const Error&) {
      std::this_thread::sleep_for(20ms);
    }
  }
  return false;
}

class RedisClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test::redisServerBinary().empty()) GTEST_SKIP() << test::kNoRedisReason;
    server_ = std::make_unique<RedisServer>();
    ASSERT_TRUE(server_->ok()) << server_->why();
  }
  std::unique_ptr<RedisServer> server_;
};

TEST_F(RedisClientTest, BinaryValuesRoundTrip) {
  RedisClient c(optionsFor(server_->endpoint()));
  std::string value("a\0b\r\n$5\r\n*1\r\n", 14);
  for (int i = 0; i < 256; ++i) value += static_cast<char>(i);
  value += std::string(1 << 20, 'z');
  const std::string key("k\0ey\r\n", 6);
  EXPECT_FALSE(c.get(key).has_value());
  c.set(key, value, 0s);
  EXPECT_EQ(c.get(key), value);
  c.set("empty", "", 60s);
  EXPECT_EQ(c.get("empty"), "");
  const std::vector<std::string> keys = {key, "missing", "empty"};
  auto many = c.getMany(keys);
  ASSERT_EQ(many.size(), 3u);
  EXPECT_EQ(many[0], value);
  EXPECT_FALSE(many[1].has_value());
  EXPECT_EQ(many[2], "");
  EXPECT_TRUE(c.del(key));
  EXPECT_FALSE(c.del(key));
  EXPECT_FALSE(c.get(key).has_value());
}

TEST_F(RedisClientTest, TtlExpires) {
  RedisClient c(optionsFor(server_->endpoint()));
  c.set("short", "lived", 1s);
  c.set("long", "lived", 3600s);
  EXPECT_EQ(c.get("short"), "lived");
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (c.get("short").has_value() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_FALSE(c.get("short").has_value()) << "the 1 s TTL never expired";
  EXPECT_EQ(c.get("long"), "lived");
}

TEST_F(RedisClientTest, ReplyOverTheCapIsRefusedAndTheClientRecovers) {
  RedisClient writer(optionsFor(server_->endpoint()));
  writer.set("big", std::string(200 * 1024, 'b'), 0s);
  writer.set("small", "ok", 0s);
  RedisClient capped(optionsFor(server_->endpoint(), 64 * 1024));
  EXPECT_EQ(codeOf([&] { capped.get("big"); }), ErrorCode::kInvalidData);
  // The connection was dropped; the next call reconnects at once.
  EXPECT_EQ(capped.get("small"), "ok");
  EXPECT_EQ(capped.reconnects(), 1u);
}

TEST_F(RedisClientTest, ServerKilledMidRunFailsBoundedThenRecovers) {
  RedisClient c(optionsFor(server_->endpoint()));
  c.set("k", "v", 0s);
  EXPECT_EQ(c.get("k"), "v");
  server_->kill();
  // Every call fails with an error (no hang: each is bounded by the timeout, then by the
  // backoff that makes them fail at once).
  for (int i = 0; i < 20; ++i) {
    ErrorCode code = codeOf([&] { c.get("k"); });
    EXPECT_TRUE(code == ErrorCode::kIo || code == ErrorCode::kTimeout) << errorCodeName(code);
  }
  ASSERT_TRUE(server_->restart()) << server_->why();
  EXPECT_TRUE(eventually([&] { c.set("k", "again", 0s); }));
  EXPECT_EQ(c.get("k"), "again");
  EXPECT_GE(c.reconnects(), 1u);
}

TEST_F(RedisClientTest, StoppedServerTimesOut) {
  RedisClient c(optionsFor(server_->endpoint()));
  c.ping();
  server_->pause();
  EXPECT_EQ(codeOf([&] { c.get("k"); }), ErrorCode::kTimeout);
  server_->resume();
  EXPECT_TRUE(eventually([&] { c.ping(); }));
}

TEST_F(RedisClientTest, PasswordLogin) {
  RedisServer locked({"--requirepass", "hunter2"});
  ASSERT_TRUE(locked.ok()) << locked.why();
  RedisClient good(optionsFor(parseRedisUrl(locked.url(":hunter2@") + "/2")));
  good.set("k", "v", 0s);
  EXPECT_EQ(good.get("k"), "v");
  RedisClient bad(optionsFor(parseRedisUrl(locked.url(":wrong@"))));
  EXPECT_EQ(codeOf([&] { bad.ping(); }), ErrorCode::kAuth);
  RedisClient none(optionsFor(parseRedisUrl(locked.url())));
  EXPECT_EQ(codeOf([&] { none.ping(); }), ErrorCode::kIo);
}

TEST_F(RedisClientTest, UnixSocket) {
  const std::string dir = mesh::test::makeTempDir("tpnode-redis-sock-");
  ASSERT_FALSE(dir.empty());
  RedisServer local({"--unixsocket", dir + "/r.sock", "--unixsocketperm", "700"});
  ASSERT_TRUE(local.ok()) << local.why();
  RedisClient c(optionsFor(parseRedisUrl("unix://" + dir + "/r.sock?db=1")));
  c.set("k", "over a socket file", 0s);
  EXPECT_EQ(c.get("k"), "over a socket file");
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

// Hostile servers need no redis-server.
TEST(RedisClientHostileTest, RefusesHostileReplies) {
  struct Case {
    const char* name;
    std::string reply;
    size_t filler;
    ErrorCode expected;
  };
  const Case cases[] = {
      {"bulk longer than the cap", "$1000000000\r\n", size_t{4} << 20, ErrorCode::kInvalidData},
      {"huge array", "*2147483647\r\n", 0, ErrorCode::kInvalidData},
      {"array", "*1\r\n$1\r\nx\r\n", 0, ErrorCode::kInvalidData},
      {"malformed", "!nonsense\r\n", 0, ErrorCode::kInvalidData},
      {"endless line", "+", size_t{4} << 20, ErrorCode::kInvalidData},
      {"silent", "", 0, ErrorCode::kTimeout},
  };
  for (const Case& c : cases) {
    HostileServer server(c.reply, c.filler);
    RedisClientOptions o =
        optionsFor(parseRedisUrl("redis://127.0.0.1:" + std::to_string(server.port())), 256 * 1024);
    // No login exchange without a password and db: PING is the first command.
    RedisClient client(o);
    EXPECT_EQ(codeOf([&] { client.get("k"); }), c.expected) << c.name;
  }
}

TEST(RedisClientHostileTest, NothingListeningIsAnIoErrorThenFailsFast) {
  const uint16_t port = mesh::test::freePort();
  RedisClientOptions o = optionsFor(parseRedisUrl("redis://127.0.0.1:" + std::to_string(port)));
  o.backoff_min = 5s;
  o.backoff_max = 5s;
  RedisClient c(o);
  EXPECT_EQ(codeOf([&] { c.ping(); }), ErrorCode::kIo);
  // Within the backoff: refused without touching the network.
  try {
    c.get("k");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_NE(std::string(e.what()).find("next attempt"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tpnode::node::redis
