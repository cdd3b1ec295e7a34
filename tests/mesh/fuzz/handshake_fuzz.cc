// libFuzzer target: the handshake parsers and state machine on hostile bytes. The input is
// read as a stream of frames (header + payload) fed to an acceptor or (first byte bit 2) a
// dialer; HELLO, WELCOME and REFUSE payloads are also decoded directly. Only tpnode::Error
// (never kInternal) may come out, and an acceptor never sends WELCOME to a peer that did not
// prove the secret.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/error.h"
#include "mesh/handshake.h"

namespace {

constexpr const char* kSecret = "fuzz-secret-of-16-bytes";

tpnode::mesh::Handshake makeMachine(bool dialer, bool tls) {
  tpnode::mesh::HandshakeConfig c;
  c.node_id = dialer ? 2 : 0;
  c.expected_peer = dialer ? 0 : -1;
  c.node_count = 4;
  c.lanes = 2;
  c.secret = tls ? "" : kSecret;
  if (tls) c.peer_cert_nodes = {dialer ? 0 : 1};
  c.fingerprint_text = "peers=a:1,b:2,c:3,d:4\n";
  c.fingerprint = tpnode::mesh::computeFingerprint({"peers=a:1,b:2,c:3,d:4"});
  c.admit = [](int peer, int) { return peer == 3 ? std::string("duplicate") : std::string(); };
  tpnode::mesh::Nonce nonce{};  // all zero: the input can prove the secret against it
  return tpnode::mesh::Handshake(std::move(c), nonce);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpnode::mesh;
  std::span<const uint8_t> in(data, size);
  try {
    decodeHello(in);
  } catch (const tpnode::Error& e) {
    if (e.code() == tpnode::ErrorCode::kInternal) throw;
  }
  try {
    decodeWelcome(in);
  } catch (const tpnode::Error& e) {
    if (e.code() == tpnode::ErrorCode::kInternal) throw;
  }
  try {
    decodeRefusal(in);
  } catch (const tpnode::Error& e) {
    if (e.code() == tpnode::ErrorCode::kInternal) throw;
  }
  const bool dialer = size >= 1 && (data[0] & 4) != 0;
  const bool tls = size >= 1 && (data[0] & 8) != 0;
  Handshake hs = makeMachine(dialer, tls);
  hs.start();
  size_t pos = 0;
  if (!dialer && size >= 3 && (data[0] & 1) != 0) {
    // Reach past authentication: a HELLO with a valid proof for the (all-zero) challenge, its
    // id and lane from the input, then the rest of the input as the following frames.
    Hello hello;
    hello.node_id = data[1] % 5;
    hello.node_count = 4;
    hello.lane = data[2] % 3;
    hello.lanes = 2;
    hello.auth = !tls && (data[0] & 2) == 0;
    if (hello.auth) hello.proof = joinProof(kSecret, hello, 0, Nonce{});
    hs.onFrame(FrameType::kHello, encodeHello(hello));
    pos = 3;
  } else if (dialer && size >= 1 && (data[0] & 1) != 0) {
    hs.onFrame(FrameType::kChallenge, Nonce{});  // then the input plays the acceptor
    pos = 1;
  }
  while (pos + kFrameHeaderSize <= size && hs.state() != Handshake::State::kFailed &&
         hs.state() != Handshake::State::kDone) {
    try {
      FrameHeader h = decodeFrameHeader(ConstHeaderBytes(data + pos, kFrameHeaderSize), 0);
      pos += kFrameHeaderSize;
      if (h.length > size - pos) break;
      const bool was_unauthenticated = !dialer && hs.state() == Handshake::State::kAwaitHello;
      std::vector<uint8_t> reply = hs.onFrame(h.type, in.subspan(pos, h.length));
      pos += h.length;
      // Forging a proof from fuzz input would be a break of HMAC-SHA256 or of the machine.
      if (was_unauthenticated && !tls && reply.size() > kFrameHeaderSize &&
          reply[6] == static_cast<uint8_t>(FrameType::kWelcome)) {
        __builtin_trap();
      }
    } catch (const tpnode::Error& e) {
      if (e.code() == tpnode::ErrorCode::kInternal) throw;
      hs.abort(e);
    }
  }
  if (hs.state() == Handshake::State::kFailed && hs.errorCode() == tpnode::ErrorCode::kInternal) {
    __builtin_trap();
  }
  return 0;
}
