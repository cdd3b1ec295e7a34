#include "model/model_identity.h"

#include <openssl/sha.h>

#include <fmt/format.h>

namespace tpnode::model {

std::string modelIdentity(const GgufFile& file) {
  const GgufMetadata& meta = file.metadata();
  auto bytes = file.bytes();
  size_t header = static_cast<size_t>(std::min<uint64_t>(meta.data_offset, bytes.size()));
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(bytes.data(), header, digest);
  std::string hex;
  for (unsigned char c : digest) hex += fmt::format("{:02x}", c);
  return fmt::format("name={};arch={};bytes={};header_sha256={}",
                     meta.getStringOr("general.name", "?"),
                     meta.getStringOr("general.architecture", "?"), bytes.size(), hex);
}

}  // namespace tpnode::model
