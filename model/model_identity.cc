#include "model/model_identity.h"

#include <openssl/evp.h>
#include <openssl/sha.h>

#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "common/error.h"

namespace tpnode::model {
namespace {

std::string hex(const unsigned char* digest, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += fmt::format("{:02x}", digest[i]);
  return out;
}

// SHA-256 of every tensor's sampled windows (start, middle, end; the whole tensor when it is
// smaller than three windows), in file order. A window is clipped to the file, whose size the
// parser checked against every tensor already.
std::string weightsSample(const GgufFile& file) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    fail(ErrorCode::kInternal, "model identity: cannot start SHA-256");
  }
  const auto bytes = file.bytes();
  auto window = [&](uint64_t begin, uint64_t n) {
    begin = std::min<uint64_t>(begin, bytes.size());
    n = std::min<uint64_t>(n, bytes.size() - begin);
    EVP_DigestUpdate(ctx.get(), bytes.data() + begin, static_cast<size_t>(n));
  };
  constexpr uint64_t w = kIdentitySampleBytes;
  for (const GgufTensorInfo& t : file.metadata().tensors) {
    if (t.n_bytes <= 3 * w) {
      window(t.offset, t.n_bytes);
    } else {
      window(t.offset, w);
      window(t.offset + (t.n_bytes - w) / 2, w);
      window(t.offset + t.n_bytes - w, w);
    }
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx.get(), digest, &len) != 1) {
    fail(ErrorCode::kInternal, "model identity: cannot finish SHA-256");
  }
  return hex(digest, len);
}

}  // namespace

std::string modelIdentity(const GgufFile& file) {
  const GgufMetadata& meta = file.metadata();
  auto bytes = file.bytes();
  size_t header = static_cast<size_t>(std::min<uint64_t>(meta.data_offset, bytes.size()));
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(bytes.data(), header, digest);
  return fmt::format("name={};arch={};bytes={};header_sha256={};weights_sha256={}",
                     meta.getStringOr("general.name", "?"),
                     meta.getStringOr("general.architecture", "?"), bytes.size(),
                     hex(digest, sizeof digest), weightsSample(file));
}

}  // namespace tpnode::model
