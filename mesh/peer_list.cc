#include <algorithm>
#include <cctype>
#include <charconv>

#include "common/error.h"
#include "mesh/mesh.h"

namespace tpnode::mesh {

std::vector<PeerAddress> parsePeerList(const std::string& text) {
  std::vector<PeerAddress> peers;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string entry = text.substr(start, comma - start);
    start = comma + 1;
    if (entry.empty()) {
      fail(ErrorCode::kInvalidArgument,
           "--peers '{}': entry {} is empty; write host:port,host:port,...", text, peers.size());
    }
    size_t colon = entry.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == entry.size()) {
      fail(ErrorCode::kInvalidArgument, "--peers entry '{}' (node {}) is not host:port", entry,
           peers.size());
    }
    std::string host = entry.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    unsigned port = 0;
    const char* pb = entry.data() + colon + 1;
    const char* pe = entry.data() + entry.size();
    auto [ptr, ec] = std::from_chars(pb, pe, port);
    if (ec != std::errc() || ptr != pe || port == 0 || port > 65535) {
      fail(ErrorCode::kInvalidArgument,
           "--peers entry '{}' (node {}): port '{}' is not a number in 1..65535", entry,
           peers.size(), std::string(pb, pe));
    }
    peers.push_back(PeerAddress{host, static_cast<uint16_t>(port)});
    if (comma == text.size()) break;
  }
  if (auto dup = findDuplicatePeer(peers)) {
    fail(ErrorCode::kInvalidArgument,
         "--peers '{}': entry {} ({}) repeats entry {}; give each node its own host:port", text,
         dup->second, peers[dup->second].toString(), dup->first);
  }
  return peers;
}

bool sameAddress(const PeerAddress& a, const PeerAddress& b) {
  auto lower = [](std::string s) {
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
  };
  return a.port == b.port && lower(a.host) == lower(b.host);
}

std::optional<std::pair<size_t, size_t>> findDuplicatePeer(const std::vector<PeerAddress>& peers) {
  for (size_t j = 1; j < peers.size(); ++j) {
    for (size_t i = 0; i < j; ++i) {
      if (sameAddress(peers[i], peers[j])) return std::make_pair(i, j);
    }
  }
  return std::nullopt;
}

}  // namespace tpnode::mesh
