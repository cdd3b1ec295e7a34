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

bool exposedWithoutKey(const ApiOptions& o) {
  if (!o.api_keys.empty()) return false;
  boost::system::error_code ec;
  auto address = boost::asio::ip::make_address(o.host, ec);
  return ec || !address.is_loopback();
}

size_t defaultMaxConnections(int slots) {
  return std::max<size_t>(64, 8 * static_cast<size_t>(std::max(1, slots)));
}

ApiOptions apiOptionsFrom(const Options& o) {
  ApiOptions a;
  a.host = o.host;
  if (o.port < 0 || o.port > 65535) {
    fail(ErrorCode::kInvalidArgument, "--port {} is not a TCP port (0..65535)", o.port);
  }
  a.port = static_cast<uint16_t>(o.port);
  if (!o.api_key_file.empty()) a.api_keys = loadApiKeys(o.api_key_file);
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
  return a;
}

}  // namespace tpnode::node::api
