// libFuzzer target: the handshake parsers and state machine on hostile bytes. The input is
// read as a stream of frames (header + payload) fed to an acceptor; HELLO and REFUSE payloads
// are also decoded directly. Only tpnode::Error (never kInternal) may come out.
#include <cstddef>
#include <cstdint>
#include <span>

#include "common/error.h"
#include "mesh/handshake.h"

namespace {

tpnode::mesh::Handshake makeAcceptor() {
  tpnode::mesh::HandshakeConfig c;
  c.node_id = 0;
  c.node_count = 4;
  c.lanes = 2;
  c.secret = "fuzz";
  c.fingerprint_text = "peers=a:1,b:2,c:3,d:4\n";
  c.fingerprint = tpnode::mesh::computeFingerprint({"peers=a:1,b:2,c:3,d:4"});
  c.admit = [](int peer, int) { return peer == 3 ? std::string("duplicate") : std::string(); };
  tpnode::mesh::Nonce nonce{};
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
    decodeRefusal(in);
  } catch (const tpnode::Error& e) {
    if (e.code() == tpnode::ErrorCode::kInternal) throw;
  }
  Handshake hs = makeAcceptor();
  hs.start();
  size_t pos = 0;
  if (size >= 3 && (data[0] & 1) != 0) {
    // Reach past the HELLO checks: a well-formed HELLO with the right fingerprint, its id and
    // lane from the input, then the rest of the input as the following frames.
    Hello hello;
    hello.node_id = data[1] % 5;
    hello.node_count = 4;
    hello.lane = data[2] % 3;
    hello.lanes = 2;
    hello.auth = (data[0] & 2) == 0;
    hello.fingerprint = computeFingerprint({"peers=a:1,b:2,c:3,d:4"});
    hs.onFrame(FrameType::kHello, encodeHello(hello));
    pos = 3;
  }
  while (pos + kFrameHeaderSize <= size && hs.state() != Handshake::State::kFailed &&
         hs.state() != Handshake::State::kDone) {
    try {
      FrameHeader h = decodeFrameHeader(ConstHeaderBytes(data + pos, kFrameHeaderSize), 0);
      pos += kFrameHeaderSize;
      if (h.length > size - pos) break;
      hs.onFrame(h.type, in.subspan(pos, h.length));
      pos += h.length;
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
