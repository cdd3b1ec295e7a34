// Optional mutual TLS (OpenSSL) under the mesh protocol: --tls-cert/--tls-key/--tls-ca.
//
// Contract
// - Both sides present a certificate and verify the other's against the cluster CA (TLS 1.2
//   or later). Host names are not checked: the CA defines the cluster, and each certificate
//   names the node id(s) it may speak for, as subject CN or DNS SAN "tpnode-node-<id>"
//   (Transport::peerCertNodes). The mesh handshake that runs inside TLS refuses a peer whose
//   certificate does not name the node id it claims (or, for a dialer, the node it dialed),
//   then checks node ids, fingerprint and (if set) the secret.
// - TlsContext is immutable after create() and may be shared by threads; each transport keeps
//   what it needs alive (OpenSSL reference counts).
// - The TLS transport serializes its OpenSSL calls with a mutex (one reader and one writer may
//   call at once) and writes small frames as one record; it cannot sleep inside a read, so a
//   TLS link waits in poll() (the slower path).
#pragma once

#include <memory>

#include "mesh/mesh.h"
#include "mesh/transport.h"

struct ssl_ctx_st;

namespace tpnode::mesh {

class TlsContext {
 public:
  // Loads and checks the files; throws Error(kInvalidArgument) naming the bad one.
  static std::unique_ptr<TlsContext> create(const TlsOptions& options);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  // Runs the TLS handshake on a connected socket; throws Error(kAuth) when the peer's
  // certificate is refused (or ours is), Error(kTimeout) at the deadline.
  std::unique_ptr<Transport> wrap(Fd fd, bool accepting, Clock::time_point deadline) const;

 private:
  explicit TlsContext(ssl_ctx_st* ctx) : ctx_(ctx) {}
  ssl_ctx_st* ctx_;  // owned; freed in the destructor
};

}  // namespace tpnode::mesh
