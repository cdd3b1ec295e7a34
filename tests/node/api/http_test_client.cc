#include "tests/node/api/http_test_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>

namespace tpnode::node::api::testing {
namespace {

// Decodes a chunked body; returns false when it is incomplete.
bool dechunk(const std::string& raw, std::string& out) {
  size_t pos = 0;
  out.clear();
  for (;;) {
    size_t eol = raw.find("\r\n", pos);
    if (eol == std::string::npos) return false;
    size_t size = std::stoul(raw.substr(pos, eol - pos), nullptr, 16);
    pos = eol + 2;
    if (size == 0) return true;
    if (raw.size() < pos + size + 2) return false;
    out.append(raw, pos, size);
    pos += size + 2;
  }
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Parses a complete response from `raw`; false when more bytes are needed.
bool parseReply(const std::string& raw, bool peer_closed, HttpReply& reply) {
  size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos) return false;
  reply = {};
  std::string head = raw.substr(0, head_end);
  size_t line_end = head.find("\r\n");
  std::string status_line = head.substr(0, line_end);
  reply.status = std::stoi(status_line.substr(9, 3));
  size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
  while (pos < head.size()) {
    size_t e = head.find("\r\n", pos);
    if (e == std::string::npos) e = head.size();
    std::string line = head.substr(pos, e - pos);
    size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(' '));
      reply.headers[lower(line.substr(0, colon))] = value;
    }
    pos = e + 2;
  }
  std::string rest = raw.substr(head_end + 4);
  if (reply.status == 100) return false;
  if (lower(reply.headers["transfer-encoding"]) == "chunked") return dechunk(rest, reply.body);
  if (reply.headers.count("content-length")) {
    size_t len = std::stoul(reply.headers["content-length"]);
    if (rest.size() < len) return false;
    reply.body = rest.substr(0, len);
    return true;
  }
  reply.body = rest;
  return peer_closed;
}

}  // namespace

RawConnection::RawConnection(uint16_t port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd_);
    fd_ = -1;
    throw std::runtime_error("cannot connect to 127.0.0.1:" + std::to_string(port));
  }
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

RawConnection::~RawConnection() {
  close();
}

void RawConnection::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool RawConnection::send(const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

std::string RawConnection::readUntil(const std::string& needle, int timeout_ms) {
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (needle.empty() || out.find(needle) == std::string::npos) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) break;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) break;
    char buf[8192];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

std::string RawConnection::readAll(int timeout_ms) {
  return readUntil("", timeout_ms);
}

bool RawConnection::closedByPeer(int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) return false;
    char buf[8192];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return true;
  }
}

HttpReply httpRequest(uint16_t port, const std::string& method, const std::string& target,
                      const std::string& body, const Headers& headers) {
  RawConnection conn(port);
  std::string req = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  for (const auto& [k, v] : headers) req += k + ": " + v + "\r\n";
  if (!body.empty() || method == "POST") {
    req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  req += "\r\n" + body;
  HttpReply reply;
  if (!conn.send(req)) return reply;
  std::string raw = conn.readAll(30000);
  if (!parseReply(raw, true, reply)) reply.status = reply.status ? reply.status : 0;
  return reply;
}

HttpReply postJson(uint16_t port, const std::string& target, const nlohmann::json& body,
                   const Headers& headers) {
  Headers h = headers;
  h.emplace_back("Content-Type", "application/json");
  return httpRequest(port, "POST", target, body.dump(), h);
}

std::vector<std::string> sseData(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    std::string event = body.substr(pos, end - pos);
    // "data: ..." alone, or after an "event: <type>" line (the Responses API's events).
    size_t data = event.rfind("data: ", 0) == 0 ? 0 : event.find("\ndata: ");
    if (data != std::string::npos) out.push_back(event.substr(data == 0 ? 6 : data + 7));
    pos = end + 2;
  }
  return out;
}

}  // namespace tpnode::node::api::testing
