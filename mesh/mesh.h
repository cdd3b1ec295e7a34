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
// - Buffers: send() returns once `data` may be reused; it writes from `data` itself (no copy).
//   recv() writes straight into the caller's buffer (no copy for a frame whose receive was
//   already posted). isend/irecv buffers must stay alive and untouched until the handle is
//   waited on.
// - Progress: the caller's thread does its own socket I/O (see mesh/link.h). isend() sends on
//   the calling thread before it returns (its wait() then returns at once); while a socket is
//   full, a sender drains incoming frames of every link of the mesh (into posted receives, or
//   parked), so crossing sends and rings of large sends cannot deadlock. Post irecv() before
//   a large send to have the incoming message land in place. The blocking path allocates
//   nothing per message; irecv() allocates its handle.
// - Setup: node K dials every node below K and accepts every node above K (so the highest node
//   does not listen); each of the `sockets_per_peer` sockets of a pair runs the handshake of
//   mesh/handshake.h. A message on `tag` always travels on socket `tag % sockets_per_peer`.
// - Failure: a peer that dies, goes silent for longer than the liveness timeout, or sends a
//   malformed frame is reported through the event callback and makes every pending and later
//   operation on it throw Error(kPeerLost) with the reason. Nothing hangs forever; nothing aborts.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace tpnode::mesh {

struct PeerAddress {
  std::string host;
  uint16_t port = 0;
  std::string toString() const { return host + ":" + std::to_string(port); }
};

// Parses "a:9500,b:9500" (IPv4, names, or [IPv6]:port). Throws Error(kInvalidArgument) naming
// the bad entry, or the two entries when one host:port is listed twice (findDuplicatePeer).
std::vector<PeerAddress> parsePeerList(const std::string& text);

// One host:port (the host compared without case, as names and addresses are written).
bool sameAddress(const PeerAddress& a, const PeerAddress& b);

// The first entry that repeats an earlier one's host:port (host compared without case), as
// {earlier index, later index}; nothing when every entry is distinct. Two nodes cannot bind
// one address, so a repeated entry is always a mistake in the list.
std::optional<std::pair<size_t, size_t>> findDuplicatePeer(const std::vector<PeerAddress>& peers);

struct TlsOptions {
  std::string cert_file;  // PEM certificate of this node
  std::string key_file;   // PEM private key of this node
  std::string ca_file;    // PEM CA that signed every node's certificate
  bool enabled() const { return !cert_file.empty(); }
};

using Fingerprint = std::array<uint8_t, 32>;  // SHA-256 over what all nodes must agree on

// The cluster fingerprint over `items`, one-line "key=value" strings that every node must
// agree on (e.g. "peers=a:9500,b:9500", "node0.tp=2", "model=sha256:..."), in a fixed order.
// Throws Error(kInvalidArgument) for an item that is not one-line key=value.
Fingerprint computeFingerprint(const std::vector<std::string>& items);
// The human-readable text of the same items (one per line); nodes exchange it so that a
// mismatch names the differing keys with both values. Put it in MeshOptions::fingerprint_text.
std::string fingerprintText(const std::vector<std::string>& items);
std::string fingerprintHex(const Fingerprint& fingerprint);

struct MeshOptions {
  int node_id = 0;
  std::vector<PeerAddress> peers;  // index = node id; node_id listens on peers[node_id]
  // Where this node binds instead of peers[node_id] (not part of the fingerprint): for hosts
  // whose advertised address differs from a local one (NAT, containers, a proxy in front).
  std::optional<PeerAddress> listen;
  std::chrono::milliseconds connect_timeout{120'000};
  std::chrono::milliseconds liveness_timeout{5'000};
  std::chrono::milliseconds heartbeat_interval{500};
  uint64_t max_frame_bytes = uint64_t{1} << 30;
  int sockets_per_peer = 1;
  // The shared secret (bytes) every node proves it knows; at least kMinSecretBytes. A mesh of
  // more than one node needs it, or mutual TLS (whose certificates name the nodes), or
  // `insecure`.
  std::string cluster_secret;
  TlsOptions tls;
  // Allows a multi-node mesh with neither secret nor TLS: anyone who can reach the port can
  // join. Logged as "--insecure" whenever it matters.
  bool insecure = false;
  Fingerprint fingerprint{};     // see computeFingerprint()
  std::string fingerprint_text;  // fingerprintText() of the same items
  // A receive that finds no data spins (non-blocking reads) this long before sleeping in
  // poll(): trades CPU for latency of small messages.
  std::chrono::microseconds spin{0};
  int socket_buffer_bytes = 0;  // SO_SNDBUF / SO_RCVBUF; 0 keeps the OS autotuning
  // connect() gives up with Error(kAborted) soon after *cancel turns true (e.g. a shutdown
  // signal while waiting for peers). Must outlive connect(); null: never cancelled.
  const std::atomic<bool>* cancel = nullptr;
};

// kLost: the peer died, went silent or broke the protocol. kClosed: the peer shut down in
// order (it sent GOODBYE): what it sent before is still received, then operations on it throw
// Error(kPeerLost) all the same (peerAlive() is false from the first GOODBYE on).
enum class PeerEventKind { kConnected, kLost, kClosed };

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
  double rtt_us_median = 0;  // measured by linkStats()
  double rtt_us_p99 = 0;
  double rtt_us_min = 0;
  double rtt_us_max = 0;
  std::string error;  // non-empty: measuring this link failed (the peer was lost); no RTTs
};

// The shortest cluster secret accepted: 16 bytes (128 bits).
inline constexpr size_t kMinSecretBytes = 16;

// Tags below kFirstUserTag are reserved for the mesh itself (linkStats uses tag 1).
inline constexpr uint32_t kFirstUserTag = 16;

class Mesh {
 public:
  virtual ~Mesh() = default;

  // Listens on peers[node_id], connects to every other node (retrying with backoff until
  // connect_timeout), runs the handshake and authentication on each link and returns once all
  // links are up. Logs `[mesh] node r/N connected to all peers` then. Refused connections
  // (wrong secret, fingerprint, version, duplicate id) are logged and retried until the
  // deadline, so that the right peer can still come; at the deadline throws Error(kTimeout)
  // naming each node that never came (id, host:port) and the last problem seen with it.
  // Error(kInvalidArgument) for bad options or TLS files, for a multi-node mesh with neither
  // cluster secret nor TLS (unless `insecure`), and for a secret shorter than kMinSecretBytes;
  // Error(kIo) when it cannot listen.
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

  // Called on the liveness thread or on a thread that found the failure; must not block and
  // must not call back into the Mesh. Replaces any earlier callback.
  virtual void setEventCallback(std::function<void(const PeerEvent&)> callback) = 0;
  virtual bool peerAlive(int peer) const = 0;
  // Declares `peer` lost as if its links had failed with `reason` (e.g. it keeps heartbeating
  // but does not answer a step in time): its links are closed, pending and later operations on
  // it throw Error(kPeerLost) naming the reason, and the event callback reports kLost once.
  // Never blocks; from any thread. A peer already lost is left as it is.
  virtual void failPeer(int peer, const std::string& reason) = 0;

  // Measures `rounds` round trips of a 64-byte message with every peer and returns one entry
  // per peer (index = node id; this node's own entry has peer = -1). Collective: every node
  // must call it with the same `rounds`; do not run other traffic on tag 1 meanwhile. A link
  // that fails (its peer is lost, within the liveness timeout) does not throw: its entry says
  // why in `error` and the other links are still measured.
  virtual std::vector<LinkStats> linkStats(int rounds = 20) = 0;

  // Says GOODBYE on every link, waits (bounded, ~2 s) for the peers' GOODBYE and closes every
  // link; pending and later operations throw Error(kAborted). Idempotent. Call it on every
  // node at the end of a run so that no node sees the others' exit as a fault.
  virtual void shutdown() = 0;
};

}  // namespace tpnode::mesh
