// A small blocking HTTP/1.1 client for the API tests (loopback only), with a receive timeout
// so that a broken server fails the test instead of hanging it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpnode::node::api::testing {

struct HttpReply {
  int status = 0;                              // 0: no answer (connection failed or closed)
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;                            // de-chunked
  nlohmann::json json() const { return nlohmann::json::parse(body); }
};

using Headers = std::vector<std::pair<std::string, std::string>>;

HttpReply httpRequest(uint16_t port, const std::string& method, const std::string& target,
                      const std::string& body = {}, const Headers& headers = {});
HttpReply postJson(uint16_t port, const std::string& target, const nlohmann::json& body,
                   const Headers& headers = {});

// The "data: " payloads of a server-sent-events body, in order (an event may start with an
// "event: <type>" line).
std::vector<std::string> sseData(const std::string& body);

// A raw TCP connection to 127.0.0.1:port (receive timeout 10 s).
class RawConnection {
 public:
  explicit RawConnection(uint16_t port);
  ~RawConnection();
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool send(const std::string& bytes);
  // Reads until `needle` has been seen, the peer closes, or the timeout; returns all read.
  std::string readUntil(const std::string& needle, int timeout_ms = 10000);
  // Reads everything until the peer closes (or the timeout).
  std::string readAll(int timeout_ms = 10000);
  // True when the peer closed the connection (read returns 0) within the timeout.
  bool closedByPeer(int timeout_ms = 10000);
  void close();

 private:
  int fd_ = -1;
};

}  // namespace tpnode::node::api::testing
