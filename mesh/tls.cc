#include "mesh/tls.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <string_view>
#include <vector>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "common/error.h"
#include "common/mutex.h"
#include "mesh/handshake.h"

namespace tpnode::mesh {

namespace {

constexpr size_t kCoalesceBytes = 16 * 1024;  // frames up to this size go out as one record

std::string opensslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "no OpenSSL detail" : out;
}

struct SslDeleter {
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};

// The node ids a certificate names: subject CN and DNS SANs of the form tpnode-node-<id>.
std::vector<int> certNodes(X509* cert) {
  std::vector<int> out;
  auto add = [&](const unsigned char* data, int len) {
    if (data == nullptr || len <= 0) return;
    std::string_view name(reinterpret_cast<const char*>(data), static_cast<size_t>(len));
    if (name.find('\0') != std::string_view::npos) return;  // an embedded NUL is not a name
    int id = nodeIdOfCertName(name);
    if (id >= 0 && std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
  };
  X509_NAME* subject = X509_get_subject_name(cert);
  for (int i = X509_NAME_get_index_by_NID(subject, NID_commonName, -1); i >= 0;
       i = X509_NAME_get_index_by_NID(subject, NID_commonName, i)) {
    ASN1_STRING* s = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, i));
    add(ASN1_STRING_get0_data(s), ASN1_STRING_length(s));
  }
  auto* sans =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (sans != nullptr) {
    for (int i = 0; i < sk_GENERAL_NAME_num(sans); ++i) {
      const GENERAL_NAME* g = sk_GENERAL_NAME_value(sans, i);
      if (g->type == GEN_DNS)
        add(ASN1_STRING_get0_data(g->d.dNSName), ASN1_STRING_length(g->d.dNSName));
    }
    GENERAL_NAMES_free(sans);
  }
  return out;
}

class TlsTransport final : public Transport {
 public:
  TlsTransport(Fd fd, std::unique_ptr<SSL, SslDeleter> ssl)
      : fd_(std::move(fd)), ssl_(std::move(ssl)) {
    if (X509* cert = SSL_get0_peer_certificate(ssl_.get())) {
      has_cert_ = true;
      cert_nodes_ = certNodes(cert);
    }
  }

  bool hasPeerCertificate() const override { return has_cert_; }
  std::vector<int> peerCertNodes() const override { return cert_nodes_; }

  int fd() const override { return fd_.get(); }

  ssize_t read(void* buffer, size_t size) override {
    MutexLock lock(mu_);
    size_t n = 0;
    if (SSL_read_ex(ssl_.get(), buffer, size, &n) == 1) return static_cast<ssize_t>(n);
    return failure("TLS read", SSL_get_error(ssl_.get(), 0));
  }

  ssize_t writev(const iovec* iov, int count) override {
    MutexLock lock(mu_);
    const void* data = iov[0].iov_base;
    size_t size = iov[0].iov_len;
    size_t total = 0;
    for (int i = 0; i < count; ++i) total += iov[i].iov_len;
    if (count > 1 && total <= kCoalesceBytes) {
      staging_.clear();
      for (int i = 0; i < count; ++i) {
        auto* p = static_cast<const uint8_t*>(iov[i].iov_base);
        staging_.insert(staging_.end(), p, p + iov[i].iov_len);
      }
      data = staging_.data();
      size = staging_.size();
    }
    size_t n = 0;
    if (SSL_write_ex(ssl_.get(), data, size, &n) == 1) return static_cast<ssize_t>(n);
    return failure("TLS write", SSL_get_error(ssl_.get(), 0));
  }

  bool hasBuffered() const override {
    MutexLock lock(mu_);
    return SSL_pending(ssl_.get()) > 0;
  }

  void shutdownWrite() override {
    {
      MutexLock lock(mu_);
      SSL_shutdown(ssl_.get());
    }
    ::shutdown(fd_.get(), SHUT_WR);
  }
  void shutdownBoth() override { ::shutdown(fd_.get(), SHUT_RDWR); }
  const char* name() const override { return "tls"; }

 private:
  ssize_t failure(const char* what, int err) {
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return kWouldBlock;
    if (err == SSL_ERROR_ZERO_RETURN) return 0;
    if (err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
      ERR_clear_error();
      return 0;  // the peer closed the TCP connection without close_notify
    }
    fail(ErrorCode::kPeerLost, "{}: {}", what, opensslErrors());
  }

  Fd fd_;
  bool has_cert_ = false;
  std::vector<int> cert_nodes_;
  mutable Mutex mu_;
  std::unique_ptr<SSL, SslDeleter> ssl_ TP_GUARDED_BY(mu_);
  std::vector<uint8_t> staging_ TP_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<TlsContext> TlsContext::create(const TlsOptions& o) {
  if (o.cert_file.empty() || o.key_file.empty() || o.ca_file.empty()) {
    fail(ErrorCode::kInvalidArgument,
         "mutual TLS needs all of --tls-cert, --tls-key and --tls-ca (got cert '{}', key '{}', "
         "ca '{}')",
         o.cert_file, o.key_file, o.ca_file);
  }
  SSL_CTX* ctx = SSL_CTX_new(TLS_method());
  if (ctx == nullptr) fail(ErrorCode::kInternal, "SSL_CTX_new: {}", opensslErrors());
  std::unique_ptr<TlsContext> out(new TlsContext(ctx));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_use_certificate_chain_file(ctx, o.cert_file.c_str()) != 1) {
    fail(ErrorCode::kInvalidArgument, "--tls-cert '{}': {}", o.cert_file, opensslErrors());
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, o.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    fail(ErrorCode::kInvalidArgument, "--tls-key '{}': {}", o.key_file, opensslErrors());
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    fail(ErrorCode::kInvalidArgument, "--tls-key '{}' does not match --tls-cert '{}'", o.key_file,
         o.cert_file);
  }
  if (SSL_CTX_load_verify_locations(ctx, o.ca_file.c_str(), nullptr) != 1) {
    fail(ErrorCode::kInvalidArgument, "--tls-ca '{}': {}", o.ca_file, opensslErrors());
  }
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  return out;
}

TlsContext::~TlsContext() {
  SSL_CTX_free(ctx_);
}

std::unique_ptr<Transport> TlsContext::wrap(Fd fd, bool accepting,
                                            Clock::time_point deadline) const {
  std::unique_ptr<SSL, SslDeleter> ssl(SSL_new(ctx_));
  if (!ssl || SSL_set_fd(ssl.get(), fd.get()) != 1) {
    fail(ErrorCode::kInternal, "SSL_new: {}", opensslErrors());
  }
  ERR_clear_error();
  for (;;) {
    int rc = accepting ? SSL_accept(ssl.get()) : SSL_connect(ssl.get());
    if (rc == 1) break;
    int err = SSL_get_error(ssl.get(), rc);
    if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
      long verify = SSL_get_verify_result(ssl.get());
      std::string detail =
          verify != X509_V_OK ? X509_verify_cert_error_string(verify) : opensslErrors();
      fail(ErrorCode::kAuth, "TLS handshake failed: {}", detail);
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) fail(ErrorCode::kTimeout, "TLS handshake timed out");
    pollfd p{fd.get(), static_cast<short>(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), 0};
    ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 200)));
  }
  return std::make_unique<TlsTransport>(std::move(fd), std::move(ssl));
}

}  // namespace tpnode::mesh
