#include "node/api/api_options.h"

#include <gtest/gtest.h>

#include <functional>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "node/api/router.h"
#include "node/kv_redis_options.h"

namespace tpnode::node::api {
namespace {

namespace fs = std::filesystem;

std::string writeTemp(const std::string& name, const std::string& text) {
  fs::path p = fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  std::ofstream(p) << text;
  return p.string();
}

TEST(ApiOptionsTest, KeyFileSkipsCommentsAndBlankLinesAndTrims) {
  std::string path = writeTemp("keys", "# keys\n\n  sk-one \r\nsk-two\n#sk-three\n");
  EXPECT_EQ(loadApiKeys(path), (std::vector<std::string>{"sk-one", "sk-two"}));
  fs::remove(path);
}

TEST(ApiOptionsTest, MissingOrEmptyKeyFileIsRefused) {
  std::string empty = writeTemp("empty_keys", "# nothing\n\n");
  for (const std::string& path : {empty, std::string("/nonexistent/keys")}) {
    try {
      loadApiKeys(path);
      ADD_FAILURE() << path;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
    }
  }
  fs::remove(empty);
}

TEST(ApiOptionsTest, FromProcessOptions) {
  Options o;
  o.host = "0.0.0.0";
  o.port = 9000;
  ApiOptions a = apiOptionsFrom(o);
  EXPECT_EQ(a.host, "0.0.0.0");
  EXPECT_EQ(a.port, 9000);
  EXPECT_TRUE(a.api_keys.empty());
  o.api_tls_cert = "cert.pem";  // without a key
  EXPECT_THROW(apiOptionsFrom(o), Error);
  o.api_tls_cert.clear();
  o.api_max_body = 100;
  EXPECT_THROW(apiOptionsFrom(o), Error);
  o.api_max_body = 4096;
  EXPECT_EQ(apiOptionsFrom(o).max_body_bytes, 4096u);
  o.port = 70000;
  EXPECT_THROW(apiOptionsFrom(o), Error);
}

TEST(ApiOptionsTest, CommandLineFlags) {
  const char* argv[] = {"tpnode", "--api-tls-cert", "c.pem", "--api-tls-key",
                        "k.pem",  "--api-max-body", "2048",  "--port",
                        "0",      "--host",         "::1"};
  Options o;
  int exit_code = 0;
  ASSERT_EQ(
      parseCommandLine(static_cast<int>(std::size(argv)), const_cast<char**>(argv), o, exit_code),
      ParseResult::kRun);
  EXPECT_EQ(o.api_tls_cert, "c.pem");
  EXPECT_EQ(o.api_tls_key, "k.pem");
  EXPECT_EQ(o.api_max_body, 2048u);
  ApiOptions a = apiOptionsFrom(o);
  EXPECT_EQ(a.port, 0);
  EXPECT_EQ(a.host, "::1");
  EXPECT_EQ(a.tls_cert_file, "c.pem");
}

TEST(ApiOptionsTest, RedisFlags) {
  const char* argv[] = {"tpnode",
                        "--kv-cache-redis-ttl",
                        "60",
                        "--redis-timeout",
                        "0.25",
                        "--responses-store-redis-url",
                        "unix:///run/redis.sock",
                        "--responses-store-ttl",
                        "120"};
  Options o;
  int exit_code = 0;
  ASSERT_EQ(
      parseCommandLine(static_cast<int>(std::size(argv)), const_cast<char**>(argv), o, exit_code),
      ParseResult::kRun);
  ApiOptions a = apiOptionsFrom(o);
  // The KV tier runs with CPU or GPU ranks (tensor parallel, pipeline stages, both) and the
  // prefix cache; --prefix-cache off is refused, naming the flag.
  o.kv_cache_redis_url = "redis://:pw@10.0.0.5:6380/2";
  EXPECT_NO_THROW(refuseKvRedisTier(o));
  for (auto change : std::vector<std::function<void(Options&)>>{
           [](Options& x) { x.pp = 2; }, [](Options& x) { x.split = SplitFlag::kAuto; },
           [](Options& x) { x.split = SplitFlag::kPipeline; },
           [](Options& x) { x.backend = Backend::kCuda; },
           [](Options& x) {
             x.backend = Backend::kCuda;
             x.pp = 2;
           }}) {
    Options accepted = o;
    change(accepted);
    EXPECT_NO_THROW(refuseKvRedisTier(accepted));
  }
  for (auto change :
       std::vector<std::function<void(Options&)>>{[](Options& x) { x.prefix_cache = "off"; }}) {
    Options refused = o;
    change(refused);
    try {
      refuseKvRedisTier(refused);
      ADD_FAILURE() << "an unsupported combination with --kv-cache-redis-url was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
      EXPECT_NE(std::string(e.what()).find("--kv-cache-redis-url"), std::string::npos) << e.what();
    }
  }
  {
    const char* kv_argv[] = {"tpnode", "--kv-cache-redis-url", "redis://127.0.0.1:6379",
                             "--prefix-cache", "off"};
    Options refused;
    int code = 0;
    EXPECT_EQ(parseCommandLine(5, const_cast<char**>(kv_argv), refused, code),
              ParseResult::kExitError);
    EXPECT_EQ(code, 2);
    const char* ok_argv[] = {"tpnode", "--kv-cache-redis-url", "redis://127.0.0.1:6379"};
    Options accepted;
    EXPECT_EQ(parseCommandLine(3, const_cast<char**>(ok_argv), accepted, code), ParseResult::kRun);
    const char* pp_argv[] = {
        "tpnode",  "--kv-cache-redis-url",   "redis://127.0.0.1:6379", "--pp", "2",
        "--peers", "127.0.0.1:1,127.0.0.1:2"};
    Options staged;
    EXPECT_EQ(parseCommandLine(7, const_cast<char**>(pp_argv), staged, code), ParseResult::kRun);
  }
  ASSERT_TRUE(a.responses_redis);
  EXPECT_TRUE(a.responses_redis->unix_socket);
  EXPECT_EQ(a.responses_ttl, std::chrono::seconds(120));
  EXPECT_EQ(a.redis_timeout, std::chrono::milliseconds(250));
  auto kv = kvBlockStoreOptionsFrom(o);
  ASSERT_TRUE(kv);
  EXPECT_EQ(kv->endpoint.host, "10.0.0.5");
  EXPECT_EQ(kv->endpoint.port, 6380);
  EXPECT_EQ(kv->endpoint.db, 2);
  EXPECT_EQ(kv->ttl, std::chrono::seconds(60));
  EXPECT_EQ(kv->timeout, std::chrono::milliseconds(250));

  Options none;
  EXPECT_FALSE(kvBlockStoreOptionsFrom(none));
  EXPECT_FALSE(apiOptionsFrom(none).responses_redis);
  none.kv_cache_redis_url = "http://x";
  EXPECT_THROW(kvBlockStoreOptionsFrom(none), Error);
  none.kv_cache_redis_url.clear();
  none.responses_store_redis_url = "redis://h:99999";
  EXPECT_THROW(apiOptionsFrom(none), Error);
  none.responses_store_redis_url.clear();
  none.redis_timeout_s = 0;
  EXPECT_THROW(apiOptionsFrom(none), Error);
}

TEST(ApiOptionsTest, BearerTokensAreCheckedExactly) {
  std::vector<std::string> keys = {"sk-a", "sk-bb"};
  EXPECT_TRUE(authorized({}, ""));
  EXPECT_TRUE(authorized(keys, "Bearer sk-a"));
  EXPECT_TRUE(authorized(keys, "bearer  sk-bb"));
  EXPECT_FALSE(authorized(keys, ""));
  EXPECT_FALSE(authorized(keys, "Bearer "));
  EXPECT_FALSE(authorized(keys, "Bearer sk-"));
  EXPECT_FALSE(authorized(keys, "Bearer sk-aa"));
  EXPECT_FALSE(authorized(keys, "Basic sk-a"));
  EXPECT_FALSE(authorized(keys, "sk-a"));
}

TEST(ApiOptionsTest, LimitsDefaultsAndFlags) {
  Options o;
  o.parallel = 4;
  EXPECT_EQ(apiOptionsFrom(o).max_connections, 64u);  // max(64, 8 x 4)
  o.parallel = 16;
  EXPECT_EQ(apiOptionsFrom(o).max_connections, 128u);
  o.max_connections = 10;
  EXPECT_EQ(apiOptionsFrom(o).max_connections, 10u);
  o.max_connections = -1;
  EXPECT_THROW(apiOptionsFrom(o), Error);
  o.max_connections = 0;
  o.max_tap_requests = -1;
  EXPECT_THROW(apiOptionsFrom(o), Error);

  const char* argv[] = {"tpnode", "--max-connections", "100",     "--max-tap-requests",
                        "2",      "--max-tap-bytes",   "1000000", "--step-timeout",
                        "30",     "--rejoin-timeout",  "5"};
  Options f;
  int exit_code = 0;
  ASSERT_EQ(
      parseCommandLine(static_cast<int>(std::size(argv)), const_cast<char**>(argv), f, exit_code),
      ParseResult::kRun);
  ApiOptions a = apiOptionsFrom(f);
  EXPECT_EQ(a.max_connections, 100u);
  EXPECT_EQ(a.max_tap_requests, 2);
  EXPECT_EQ(a.max_tap_bytes, 1000000u);
  EXPECT_DOUBLE_EQ(f.step_timeout_s, 30);
  EXPECT_DOUBLE_EQ(f.rejoin_timeout_s, 5);
}

TEST(ApiOptionsTest, NonLoopbackWithoutAKeyIsFlagged) {
  ApiOptions a;
  for (const char* host : {"127.0.0.1", "127.0.0.2", "::1"}) {
    a.host = host;
    EXPECT_FALSE(exposedWithoutKey(a)) << host;
  }
  for (const char* host : {"0.0.0.0", "::", "10.1.2.3", "not-an-address"}) {
    a.host = host;
    EXPECT_TRUE(exposedWithoutKey(a)) << host;
  }
  a.api_keys = {"k"};
  EXPECT_FALSE(exposedWithoutKey(a));
}

}  // namespace
}  // namespace tpnode::node::api
