// The per-connection handshake as a pure state machine: no sockets, no clocks, so every path
// is unit-tested and fuzzed. The connector feeds it received frames and writes what it returns.
//
// Sequence (protocol version 2; the dialer joins, the acceptor admits):
//   1. acceptor -> CHALLENGE {fresh acceptor nonce}                 (nothing else about it)
//   2. dialer   -> HELLO {node id, node count, lane, lanes, secret on/off, fresh dialer nonce,
//                         join proof}
//      join proof = HMAC-SHA256(secret, "tpnode-mesh-join-v2" | dialer id | acceptor id |
//                   node count | lane | lanes | acceptor nonce | dialer nonce); empty without
//                   a secret
//   3. acceptor: authenticates the dialer first (the proof; with TLS, the certificate must
//      name the node id claimed); then checks ids, node count, lanes and admission (duplicate
//      ids), and only then sends
//      WELCOME {acceptor id, welcome proof, fingerprint, fingerprint text}
//      welcome proof = HMAC-SHA256(secret, "tpnode-mesh-welcome-v2" | acceptor id |
//                      dialer id | lane | dialer nonce | acceptor nonce | fingerprint | text)
//   4. dialer: verifies the welcome proof and compares fingerprints; sends ACCEPT (done)
//   5. acceptor: on ACCEPT, done
// So an unauthenticated dialer learns nothing but a random nonce: no proof to guess the secret
// from offline, no fingerprint, no cluster detail, and no node-id slot is reserved for it.
// A REFUSE sent before the peer is authenticated carries a fixed reason that names no value of
// this node; the local error() says everything. A REFUSE from the peer ends in kFailed with
// its reason.
//
// Contract: one Handshake per connection, used by one thread. Received payloads are hostile:
// malformed ones end the handshake with kInvalidData, never an abort.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "mesh/crypto.h"
#include "mesh/frame.h"
#include "mesh/mesh.h"

namespace tpnode::mesh {

using Nonce = std::array<uint8_t, 32>;

inline constexpr size_t kMaxFingerprintText = 4096;
inline constexpr size_t kMaxRefuseText = 2048;

inline constexpr int kNoCertificate = -1;  // HandshakeConfig::peer_cert_nodes: no TLS

// The dialer's HELLO.
struct Hello {
  uint32_t node_id = 0;
  uint32_t node_count = 0;
  uint32_t lane = 0;   // which of the `lanes` sockets of this node pair
  uint32_t lanes = 1;  // sockets per peer
  bool auth = false;   // the sender has a cluster secret; then `proof` follows
  Nonce nonce{};
  Digest proof{};
};

std::vector<uint8_t> encodeHello(const Hello& hello);
Hello decodeHello(std::span<const uint8_t> payload);  // throws Error(kInvalidData)

// The acceptor's WELCOME.
struct Welcome {
  uint32_t node_id = 0;
  bool auth = false;  // `proof` is meaningful (else all zero)
  Digest proof{};
  Fingerprint fingerprint{};
  std::string fingerprint_text;  // printable ASCII, at most kMaxFingerprintText
};

std::vector<uint8_t> encodeWelcome(const Welcome& welcome);
Welcome decodeWelcome(std::span<const uint8_t> payload);  // throws Error(kInvalidData)

struct Refusal {
  ErrorCode code = ErrorCode::kMismatch;
  std::string reason;
};
std::vector<uint8_t> encodeRefusal(const Refusal& refusal);
Refusal decodeRefusal(std::span<const uint8_t> payload);  // throws Error(kInvalidData)

Digest joinProof(std::string_view secret, const Hello& hello, uint32_t acceptor_id,
                 const Nonce& acceptor_nonce);
Digest welcomeProof(std::string_view secret, const Welcome& welcome, uint32_t dialer_id,
                    uint32_t lane, const Nonce& dialer_nonce, const Nonce& acceptor_nonce);

// The node ids a certificate names: each subject CN and DNS SAN of the form "tpnode-node-<id>"
// (decimal, no sign or leading zeros). Parses one name; -1 when it is not of that form.
int nodeIdOfCertName(std::string_view name);

// Names each key=value line that differs between two fingerprint texts, with both values.
std::string describeFingerprintMismatch(int node_a, const std::string& text_a, int node_b,
                                        const std::string& text_b);

// Replaces bytes that are not printable ASCII (hostile text shown in logs) and bounds length.
std::string printable(std::span<const uint8_t> bytes, size_t max_len);

struct HandshakeConfig {
  int node_id = 0;
  int node_count = 0;
  int lane = 0;  // the dialer: which socket of the pair this is; the acceptor learns it
  int lanes = 1;
  Fingerprint fingerprint{};
  std::string fingerprint_text;
  std::string secret;      // empty: no secret (then TLS or --insecure)
  int expected_peer = -1;  // the dialer: the node it dialed; the acceptor: -1
  // With TLS: the node ids the peer's verified certificate names (nodeIdOfCertName); the
  // peer must be one of them. Without TLS: {kNoCertificate}.
  std::vector<int> peer_cert_nodes = {kNoCertificate};
  // The acceptor's admission rule, run only once the dialer is authenticated and passed every
  // other check (e.g. duplicate ids): returns an empty string to admit `peer` on `lane`, or
  // the refusal reason. Whatever it reserves is the caller's to release if the handshake
  // then fails (see admitted()).
  std::function<std::string(int peer, int lane)> admit;
};

class Handshake {
 public:
  enum class State { kAwaitChallenge, kAwaitHello, kAwaitWelcome, kAwaitAccept, kDone, kFailed };

  Handshake(HandshakeConfig config, const Nonce& nonce);

  // What to send first: the acceptor's CHALLENGE; nothing for the dialer (it waits for one).
  std::vector<uint8_t> start();
  // Feeds one received frame; returns the bytes to send in reply (possibly none).
  std::vector<uint8_t> onFrame(FrameType type, std::span<const uint8_t> payload);
  // Ends the handshake because the transport failed (decode error, timeout, close). Returns a
  // REFUSE to send if the failure is worth telling the peer (kMismatch / kInvalidData).
  std::vector<uint8_t> abort(const Error& error);

  State state() const { return state_; }
  int peerId() const { return peer_id_; }
  int lane() const { return static_cast<int>(lane_); }
  // The node id the peer's HELLO claimed (even when refused); -1 before a valid HELLO.
  int claimedPeer() const { return claimed_peer_; }
  // The peer proved who it is (secret and/or certificate); false in insecure mode.
  bool peerAuthenticated() const { return authenticated_; }
  // The acceptor ran `admit` successfully (the slot may need releasing after a failure).
  bool admitted() const { return admitted_; }
  ErrorCode errorCode() const { return error_code_; }
  const std::string& error() const { return error_; }
  bool refusedByPeer() const { return refused_by_peer_; }

 private:
  std::vector<uint8_t> onChallenge(std::span<const uint8_t> payload);
  std::vector<uint8_t> onHello(std::span<const uint8_t> payload);
  std::vector<uint8_t> onWelcome(std::span<const uint8_t> payload);
  // Empty when the dialer's HELLO authenticates it; else the local reason.
  std::string authenticate(const Hello& hello) const;
  std::string checkHello(const Hello& hello) const;
  bool certNames(int node) const;
  // Fails with `reason`; the peer is told `reason` too, or `told` when that is given (a
  // fixed text for a peer that is not authenticated).
  std::vector<uint8_t> refuse(ErrorCode code, std::string reason, std::string told = {});
  bool dialer() const { return config_.expected_peer >= 0; }

  HandshakeConfig config_;
  Nonce nonce_;
  Nonce peer_nonce_{};
  State state_ = State::kAwaitHello;
  bool started_ = false;
  int peer_id_ = -1;
  int claimed_peer_ = -1;
  uint32_t lane_ = 0;
  bool authenticated_ = false;
  bool admitted_ = false;
  ErrorCode error_code_ = ErrorCode::kInternal;
  std::string error_;
  bool refused_by_peer_ = false;
};

// Encodes one control frame: header followed by payload.
std::vector<uint8_t> controlFrame(FrameType type, std::span<const uint8_t> payload);

}  // namespace tpnode::mesh
