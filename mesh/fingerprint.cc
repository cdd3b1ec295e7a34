// The cluster fingerprint: SHA-256 over a canonical text of what every node must agree on.
#include <algorithm>

#include "common/error.h"
#include "mesh/crypto.h"
#include "mesh/mesh.h"

namespace tpnode::mesh {

namespace {
constexpr std::string_view kDomain = "tpnode-cluster-fingerprint-v1\n";
}

std::string fingerprintText(const std::vector<std::string>& items) {
  std::string text;
  for (const auto& item : items) {
    if (item.find('=') == std::string::npos || item.find('\n') != std::string::npos) {
      fail(ErrorCode::kInvalidArgument, "fingerprint item '{}' is not a one-line key=value", item);
    }
    text += item;
    text += '\n';
  }
  return text;
}

Fingerprint computeFingerprint(const std::vector<std::string>& items) {
  std::string text = std::string(kDomain) + fingerprintText(items);
  return sha256({reinterpret_cast<const uint8_t*>(text.data()), text.size()});
}

std::string fingerprintHex(const Fingerprint& fp) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : fp) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

}  // namespace tpnode::mesh
