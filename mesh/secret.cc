#include "mesh/secret.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <spdlog/spdlog.h>

#include "common/error.h"
#include "common/settings.h"
#include "mesh/crypto.h"
#include "mesh/mesh.h"

namespace tpnode::mesh {

std::string decodeClusterSecret(const std::string& file_text, const std::string& where) {
  std::string text = file_text;
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) {
    text.pop_back();
  }
  if (text.empty()) fail(ErrorCode::kInvalidArgument, "{} is empty", where);
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string secret = text;
  if (text.size() % 2 == 0 &&
      std::all_of(text.begin(), text.end(), [&](char c) { return hex(c) >= 0; })) {
    secret.clear();
    for (size_t i = 0; i < text.size(); i += 2) {
      secret += static_cast<char>(hex(text[i]) * 16 + hex(text[i + 1]));
    }
  }
  if (secret.size() < kMinSecretBytes) {
    fail(ErrorCode::kInvalidArgument,
         "{} holds a secret of {} bytes ({} bits); at least {} bytes ({} bits) are required "
         "(hex digits count as half a byte each): make one with `tpnode gen-secret FILE`",
         where, secret.size(), secret.size() * 8, kMinSecretBytes, kMinSecretBytes * 8);
  }
  return secret;
}

std::string loadClusterSecret(const std::string& file) {
  if (!file.empty()) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      fail(ErrorCode::kInvalidArgument, "--cluster-secret-file '{}' cannot be read", file);
    }
    std::stringstream ss;
    ss << in.rdbuf();
    std::string secret =
        decodeClusterSecret(ss.str(), fmt::format("--cluster-secret-file '{}'", file));
    struct stat st {};
    if (::stat(file.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
      spdlog::warn("[mesh] --cluster-secret-file '{}' is readable by other users (chmod 600)",
                   file);
    }
    return secret;
  }
  const std::optional<std::string> env = settings::envValue("TPNODE_CLUSTER_SECRET");
  if (!env) return "";
  return decodeClusterSecret(*env, "TPNODE_CLUSTER_SECRET");
}

void writeNewClusterSecret(const std::string& path) {
  std::array<uint8_t, 32> bytes{};
  randomBytes(bytes);  // OpenSSL RAND_bytes
  std::string text;
  for (uint8_t b : bytes) text += fmt::format("{:02x}", b);
  text += '\n';
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    int err = errno;
    fail(ErrorCode::kInvalidArgument, "cannot create '{}': {}{}", path, std::strerror(err),
         err == EEXIST ? " (it is never overwritten; remove it first to replace the secret)" : "");
  }
  ::fchmod(fd, 0600);  // whatever the umask
  ssize_t n = ::write(fd, text.data(), text.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) {
    ::unlink(path.c_str());
    fail(ErrorCode::kIo, "cannot write '{}': {}", path, std::strerror(err));
  }
}

}  // namespace tpnode::mesh
