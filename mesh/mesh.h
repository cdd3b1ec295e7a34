// The TCP peer mesh: every node of a cluster holds one authenticated connection (or
// `sockets_per_peer` of them) to every other node. There is no central server.
//
// Contract
// - Ownership: Mesh::connect() returns the only owner of every socket and thread of the mesh.
//   Destroying the Mesh closes all links and joins its threads.
// - Threads: send/recv/isend/irecv may be called from any number of threads at once. A
//   background liveness thread sends heartbeats on idle links and watches for silence; it never
//   waits on compute and compute never waits on it.
// - Ordering: messages from one sender to one receiver with the same tag are delivered in the
//   order they were sent. Messages with different tags are independent. A receive names
//   (peer, tag); a frame that arrives before its receive is posted is parked by (peer, tag).
// - Buffers: send() returns once `data` may be reused. recv() writes straight into the caller's
//   buffer (no copy for a frame whose receive was already posted). isend/irecv buffers must
//   stay alive and untouched until the handle is waited on.
// - Failure: a peer that dies, goes silent for longer than the liveness timeout, or sends a
//   malformed frame is reported through the event callback and makes every pending and later
//   operation on it throw Error(kPeerLost) with the reason. Nothing hangs forever; nothing aborts.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace tpnode::mesh {

struct PeerAddress {
  std::string host;
  uint16_t port = 0;
  std::string toString() const { return host + ":" + std::to_string(port); }
};

// Parses "a:9500,b:9500" (IPv4, names, or [IPv6]:port). Throws Error(kInvalidArgument) naming
// the bad entry.
std::vector<PeerAddress> parsePeerList(const std::string& text);

struct TlsOptions {
  std::string cert_file;  // PEM certificate of this node
  std::string key_file;   // PEM private key of this node
  std::string ca_file;    // PEM CA that signed every node's certificate
  bool enabled() const { return !cert_file.empty(); }
};

using Fingerprint = std::array<uint8_t, 32>;  // SHA-256 over what all nodes must agree on

struct MeshOptions {
  int node_id = 0;
  std::vector<PeerAddress> peers;  // index = node id; node_id listens on peers[node_id]
  std::chrono::milliseconds connect_timeout{120'000};
  std::chrono::milliseconds liveness_timeout{5'000};
  std::chrono::milliseconds heartbeat_interval{500};
  uint64_t max_frame_bytes = uint64_t{1} << 30;
  int sockets_per_peer = 1;
  std::string cluster_secret;  // empty: no HMAC authentication
  TlsOptions tls;
  Fingerprint fingerprint{};     // see computeFingerprint()
  std::string fingerprint_text;  // human-readable summary shown when fingerprints differ
};

enum class PeerEventKind { kConnected, kLost };

struct PeerEvent {
  PeerEventKind kind;
  int peer;
  std::string reason;
};

// A pending isend/irecv. wait() blocks until done and returns the received byte count (irecv)
// or the sent byte count (isend); it throws what the operation failed with.
class Request {
 public:
  virtual ~Request() = default;
  virtual size_t wait() = 0;
  virtual bool test() = 0;  // true once wait() would not block
};

struct LinkStats {
  int peer = -1;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t frames_sent = 0;
  uint64_t frames_received = 0;
  double last_rtt_us = 0;  // from heartbeats
};

// Tags below kFirstUserTag are reserved for the mesh itself.
inline constexpr uint32_t kFirstUserTag = 16;

class Mesh {
 public:
  virtual ~Mesh() = default;

  // Listens on peers[node_id], connects to every other node (retrying with backoff until
  // connect_timeout), runs the handshake and authentication on each link and returns once all
  // links are up. Throws Error(kTimeout) naming the nodes that never came, Error(kMismatch) or
  // Error(kAuth) for a refused cluster.
  static std::unique_ptr<Mesh> connect(const MeshOptions& options);

  virtual int nodeId() const = 0;
  virtual int nodeCount() const = 0;

  // Blocking send of `data` to `peer` on `tag`. Returns when `data` may be reused.
  virtual void send(int peer, uint32_t tag, std::span<const std::byte> data) = 0;
  // Blocking receive of the next message from `peer` on `tag` into `out`. Returns the message
  // size; a message larger than out.size() is Error(kInvalidData) (the link is closed).
  virtual size_t recv(int peer, uint32_t tag, std::span<std::byte> out) = 0;

  virtual std::unique_ptr<Request> isend(int peer, uint32_t tag,
                                         std::span<const std::byte> data) = 0;
  virtual std::unique_ptr<Request> irecv(int peer, uint32_t tag, std::span<std::byte> out) = 0;

  // Called on the liveness thread; must not block. Replaces any earlier callback.
  virtual void setEventCallback(std::function<void(const PeerEvent&)> callback) = 0;
  virtual bool peerAlive(int peer) const = 0;

  // Measures round trips of `bytes` with every peer (collective: every node must call it).
  virtual std::vector<LinkStats> linkStats() const = 0;

  // Closes every link; pending and later operations throw Error(kAborted).
  virtual void shutdown() = 0;
};

}  // namespace tpnode::mesh
