// The API over HTTPS (--api-tls-cert/--api-tls-key) with a throwaway self-signed certificate.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include <boost/asio/ssl.hpp>

#include "node/api/api_server.h"
#include "node/api/http_types.h"
#include "tests/node/api/fake_engine.h"
#include "tests/node/api/http_test_client.h"

namespace tpnode::node::api {
namespace {

namespace fs = std::filesystem;

class ApiTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tpnode_api_tls_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    cert_ = (dir_ / "cert.pem").string();
    key_ = (dir_ / "key.pem").string();
    std::string cmd =
        "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 -keyout " + key_ +
        " -out " + cert_ + " >/dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "skipped: the openssl command failed";
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::string cert_, key_;
  testing::FakeEngine engine_;
};

TEST_F(ApiTlsTest, ServesHttpsAndRefusesPlainHttp) {
  ApiOptions o;
  o.port = 0;
  o.tls_cert_file = cert_;
  o.tls_key_file = key_;
  ApiServer server(engine_, o);
  server.start();

  net::io_context io;
  net::ssl::context tls(net::ssl::context::tls_client);
  tls.set_verify_mode(net::ssl::verify_none);
  net::ssl::stream<tcp::socket> stream(io, tls);
  stream.next_layer().connect({net::ip::make_address("127.0.0.1"), server.port()});
  stream.handshake(net::ssl::stream_base::client);
  std::string req = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  net::write(stream, net::buffer(req));
  std::string reply;
  beast::error_code ec;
  char buf[4096];
  for (;;) {
    size_t n = stream.read_some(net::buffer(buf), ec);
    reply.append(buf, n);
    if (ec) break;
  }
  EXPECT_EQ(reply.rfind("HTTP/1.1 200", 0), 0u) << reply;
  EXPECT_NE(reply.find("{\"status\":\"ok\"}"), std::string::npos);

  testing::RawConnection plain(server.port());
  plain.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(plain.readAll(5000).find("200"), std::string::npos);
  server.stop();
}

TEST_F(ApiTlsTest, UnreadableKeyIsAStartupError) {
  ApiOptions o;
  o.port = 0;
  o.tls_cert_file = cert_;
  o.tls_key_file = (dir_ / "missing.pem").string();
  ApiServer server(engine_, o);
  try {
    server.start();
    ADD_FAILURE() << "started without a key";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("--api-tls-key"), std::string::npos);
  }
}

}  // namespace
}  // namespace tpnode::node::api
