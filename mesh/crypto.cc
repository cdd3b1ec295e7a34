#include "mesh/crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "common/check.h"

namespace tpnode::mesh {

Digest sha256(std::span<const uint8_t> data) {
  Digest out{};
  unsigned int len = 0;
  TP_CHECK(EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_sha256(), nullptr) == 1);
  TP_CHECK(len == out.size());
  return out;
}

Digest hmacSha256(std::string_view key, std::span<const uint8_t> data) {
  Digest out{};
  unsigned int len = 0;
  TP_CHECK(HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), data.data(), data.size(),
                out.data(), &len) != nullptr);
  TP_CHECK(len == out.size());
  return out;
}

void randomBytes(std::span<uint8_t> out) {
  TP_CHECK(RAND_bytes(out.data(), static_cast<int>(out.size())) == 1, "RAND_bytes failed");
}

bool constantTimeEqual(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace tpnode::mesh
