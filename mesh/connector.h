// Connection setup: opens, authenticates and collects every socket of this node's links.
//
// Contract
// - Rule: node K dials every node J < K and accepts every node J > K, `sockets_per_peer`
//   sockets per pair (the dialer names the socket's lane in its HELLO). The highest node has
//   nobody to accept and does not listen.
// - Dials that are refused or time out are retried with backoff (100 ms doubling to 2 s) until
//   options.connect_timeout; after 2 s and then every 5 s the node logs whom it is still
//   waiting for.
// - A connection that fails the handshake (wrong secret, certificate, fingerprint, version,
//   duplicate id) is refused and logged on both sides; the node keeps waiting for the right
//   peer until the deadline. A second authenticated node claiming an id that is connected or
//   connecting is refused; a peer that has not proved the secret (or, with TLS, a certificate
//   naming its id) reserves nothing.
// - Each socket is handed to `adopt` as soon as its handshake succeeds, so that the link runs
//   (heartbeats, draining) while the rest of the mesh forms: a peer that finished early does
//   not take this node for dead. `up(peer, lane)` says whether the adopted link still lives;
//   a link that dies during setup (the peer restarted) is waited for again: re-dialed, or
//   accepted again instead of being refused as a duplicate.
// - Returns once all links are up; throws Error(kTimeout) naming each missing peer (node id,
//   host:port and the last problem seen) when the deadline passes. Joins every thread it
//   started before returning or throwing.
// - Accepting holds against hostile clients: at most 64 handshakes run at once and at most 8
//   per source address (connections beyond are closed at once); each handshake thread is
//   joined as soon as it ends, and the memory such threads freed is given back to the system
//   (malloc_trim, at most once per second); an accepted peer has 5 s to prove itself (TLS and
//   HELLO) and 10 s for the whole handshake. Failing to start a thread or to accept (EMFILE,
//   ENFILE, ENOBUFS, ENOMEM) refuses that connection and goes on. Refusals of unauthenticated
//   peers and these failures are logged at most once per 5 s, with how many happened since.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "mesh/mesh.h"
#include "mesh/transport.h"

namespace tpnode::mesh {

struct EstablishedSocket {
  int peer = -1;
  int lane = 0;
  std::unique_ptr<Transport> transport;
};

// Wraps a connected TCP socket in the transport the mesh runs on (plain TCP or TLS), running
// the TLS handshake if any. `accepting` is true on the side that accepted the connection.
using TransportFactory =
    std::function<std::unique_ptr<Transport>(Fd fd, bool accepting, Clock::time_point deadline)>;

struct LinkSink {
  std::function<void(EstablishedSocket socket)> adopt;
  std::function<bool(int peer, int lane)> up;
};

void formLinks(const MeshOptions& options, const TransportFactory& make_transport,
               const LinkSink& sink);

}  // namespace tpnode::mesh
