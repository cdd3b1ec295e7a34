// The per-connection handshake as a pure state machine: no sockets, no clocks, so every path
// is unit-tested and fuzzed. The connector feeds it received frames and writes what it returns.
//
// Sequence (symmetric; both sides run the same machine):
//   1. send HELLO {node id, node count, socket lane, lanes, fingerprint, fresh nonce, text}
//   2. on the peer's HELLO: check node count, node id (range, self, the one dialed,
//      duplicates through `admit`), lanes, fingerprint, secret on/off; send AUTH =
//      HMAC-SHA256(secret, "tpnode-mesh-auth-v1" | prover id | verifier id | verifier nonce |
//      prover nonce | fingerprint | lane) — empty without a secret
//   3. on the peer's AUTH: verify it against our own fresh nonce (so a recorded AUTH never
//      verifies again: no replay); send ACCEPT
//   4. on the peer's ACCEPT: done
// Any check that fails sends REFUSE {error code, reason} and ends in kFailed; a REFUSE from the
// peer ends in kFailed with its reason. Reasons name the field and both nodes' values.
//
// Contract: one Handshake per connection, used by one thread. Received payloads are hostile:
// malformed ones end the handshake with kInvalidData, never an abort.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"
#include "mesh/crypto.h"
#include "mesh/frame.h"
#include "mesh/mesh.h"

namespace tpnode::mesh {

using Nonce = std::array<uint8_t, 32>;

inline constexpr size_t kMaxFingerprintText = 4096;
inline constexpr size_t kMaxRefuseText = 2048;

struct Hello {
  uint32_t node_id = 0;
  uint32_t node_count = 0;
  uint32_t lane = 0;   // which of the `lanes` sockets of this node pair
  uint32_t lanes = 1;  // sockets per peer
  bool auth = false;   // the sender has a cluster secret
  Fingerprint fingerprint{};
  Nonce nonce{};
  std::string fingerprint_text;  // printable ASCII, at most kMaxFingerprintText
};

std::vector<uint8_t> encodeHello(const Hello& hello);
Hello decodeHello(std::span<const uint8_t> payload);  // throws Error(kInvalidData)

struct Refusal {
  ErrorCode code = ErrorCode::kMismatch;
  std::string reason;
};
std::vector<uint8_t> encodeRefusal(const Refusal& refusal);
Refusal decodeRefusal(std::span<const uint8_t> payload);  // throws Error(kInvalidData)

Digest authMac(const std::string& secret, uint32_t prover, uint32_t verifier,
               const Nonce& verifier_nonce, const Nonce& prover_nonce,
               const Fingerprint& fingerprint, uint32_t lane);

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
  std::string secret;      // empty: no authentication
  int expected_peer = -1;  // the dialer: the node it dialed; the acceptor: -1
  // The acceptor's admission rule after all other checks (e.g. duplicate ids): returns an empty
  // string to admit `peer` on `lane`, or the refusal reason.
  std::function<std::string(int peer, int lane)> admit;
};

class Handshake {
 public:
  enum class State { kAwaitHello, kAwaitAuth, kAwaitAccept, kDone, kFailed };

  Handshake(HandshakeConfig config, const Nonce& nonce);

  // The HELLO frame (header and payload) to send first.
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
  ErrorCode errorCode() const { return error_code_; }
  const std::string& error() const { return error_; }
  bool refusedByPeer() const { return refused_by_peer_; }

 private:
  std::vector<uint8_t> onHello(std::span<const uint8_t> payload);
  std::vector<uint8_t> onAuth(std::span<const uint8_t> payload);
  std::string checkHello(const Hello& hello) const;
  std::vector<uint8_t> refuse(ErrorCode code, std::string reason);

  HandshakeConfig config_;
  Nonce nonce_;
  Nonce peer_nonce_{};
  State state_ = State::kAwaitHello;
  bool started_ = false;
  int peer_id_ = -1;
  int claimed_peer_ = -1;
  uint32_t lane_ = 0;
  ErrorCode error_code_ = ErrorCode::kInternal;
  std::string error_;
  bool refused_by_peer_ = false;
};

// Encodes one control frame: header followed by payload.
std::vector<uint8_t> controlFrame(FrameType type, std::span<const uint8_t> payload);

}  // namespace tpnode::mesh
