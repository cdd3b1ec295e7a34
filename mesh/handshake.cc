#include "mesh/handshake.h"

#include <map>
#include <sstream>

#include "common/byte_order.h"

namespace tpnode::mesh {

namespace {

constexpr size_t kHelloFixed = 86;
constexpr std::string_view kAuthDomain = "tpnode-mesh-auth-v1";

std::map<std::string, std::string> keyValues(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

}  // namespace

std::string printable(std::span<const uint8_t> bytes, size_t max_len) {
  std::string out;
  for (size_t i = 0; i < bytes.size() && i < max_len; ++i) {
    uint8_t c = bytes[i];
    out += (c >= 0x20 && c < 0x7f) || c == '\n' ? static_cast<char>(c) : '?';
  }
  return out;
}

std::vector<uint8_t> controlFrame(FrameType type, std::span<const uint8_t> payload) {
  std::vector<uint8_t> out(kFrameHeaderSize + payload.size());
  FrameHeader h;
  h.type = type;
  h.length = payload.size();
  encodeFrameHeader(h, HeaderBytes(out.data(), kFrameHeaderSize));
  std::copy(payload.begin(), payload.end(), out.begin() + kFrameHeaderSize);
  return out;
}

std::vector<uint8_t> encodeHello(const Hello& hello) {
  size_t text_len = std::min(hello.fingerprint_text.size(), kMaxFingerprintText);
  std::vector<uint8_t> out(kHelloFixed + text_len, 0);
  storeLE32(&out[0], hello.node_id);
  storeLE32(&out[4], hello.node_count);
  storeLE32(&out[8], hello.lane);
  storeLE32(&out[12], hello.lanes);
  out[16] = hello.auth ? 1 : 0;
  std::copy(hello.fingerprint.begin(), hello.fingerprint.end(), out.begin() + 20);
  std::copy(hello.nonce.begin(), hello.nonce.end(), out.begin() + 52);
  storeLE16(&out[84], static_cast<uint16_t>(text_len));
  std::copy_n(hello.fingerprint_text.begin(), text_len, out.begin() + kHelloFixed);
  return out;
}

Hello decodeHello(std::span<const uint8_t> p) {
  if (p.size() < kHelloFixed) {
    fail(ErrorCode::kInvalidData, "HELLO of {} bytes, expected at least {}", p.size(), kHelloFixed);
  }
  Hello h;
  h.node_id = loadLE32(&p[0]);
  h.node_count = loadLE32(&p[4]);
  h.lane = loadLE32(&p[8]);
  h.lanes = loadLE32(&p[12]);
  if (p[16] > 1) fail(ErrorCode::kInvalidData, "HELLO: auth flag {}, expected 0 or 1", p[16]);
  h.auth = p[16] == 1;
  if (p[17] != 0 || p[18] != 0 || p[19] != 0) {
    fail(ErrorCode::kInvalidData, "HELLO: reserved bytes are not zero");
  }
  std::copy_n(p.begin() + 20, 32, h.fingerprint.begin());
  std::copy_n(p.begin() + 52, 32, h.nonce.begin());
  size_t text_len = loadLE16(&p[84]);
  if (text_len > kMaxFingerprintText || text_len != p.size() - kHelloFixed) {
    fail(ErrorCode::kInvalidData, "HELLO: text length {} does not match the {} bytes sent",
         text_len, p.size() - kHelloFixed);
  }
  auto text = p.subspan(kHelloFixed);
  for (uint8_t c : text) {
    if ((c < 0x20 || c >= 0x7f) && c != '\n') {
      fail(ErrorCode::kInvalidData, "HELLO: fingerprint text has a non-printable byte 0x{:02x}", c);
    }
  }
  h.fingerprint_text.assign(text.begin(), text.end());
  return h;
}

std::vector<uint8_t> encodeRefusal(const Refusal& r) {
  size_t len = std::min(r.reason.size(), kMaxRefuseText);
  std::vector<uint8_t> out(6 + len);
  storeLE32(&out[0], static_cast<uint32_t>(r.code));
  storeLE16(&out[4], static_cast<uint16_t>(len));
  std::copy_n(r.reason.begin(), len, out.begin() + 6);
  return out;
}

Refusal decodeRefusal(std::span<const uint8_t> p) {
  if (p.size() < 6) fail(ErrorCode::kInvalidData, "REFUSE of {} bytes is too short", p.size());
  uint32_t code = loadLE32(&p[0]);
  size_t len = loadLE16(&p[4]);
  // kInternal names a bug in *this* process; a peer may not hand us one (found by the fuzzer:
  // a hostile REFUSE made the local handshake report an internal error).
  if (code >= static_cast<uint32_t>(ErrorCode::kInternal)) {
    fail(ErrorCode::kInvalidData, "REFUSE: error code {} is not one a peer may send", code);
  }
  if (len > kMaxRefuseText || len != p.size() - 6) {
    fail(ErrorCode::kInvalidData, "REFUSE: reason length {} does not match the {} bytes sent", len,
         p.size() - 6);
  }
  return Refusal{static_cast<ErrorCode>(code), printable(p.subspan(6), kMaxRefuseText)};
}

Digest authMac(const std::string& secret, uint32_t prover, uint32_t verifier,
               const Nonce& verifier_nonce, const Nonce& prover_nonce,
               const Fingerprint& fingerprint, uint32_t lane) {
  std::vector<uint8_t> msg(kAuthDomain.begin(), kAuthDomain.end());
  auto append32 = [&](uint32_t v) {
    uint8_t b[4];
    storeLE32(b, v);
    msg.insert(msg.end(), b, b + 4);
  };
  append32(prover);
  append32(verifier);
  msg.insert(msg.end(), verifier_nonce.begin(), verifier_nonce.end());
  msg.insert(msg.end(), prover_nonce.begin(), prover_nonce.end());
  msg.insert(msg.end(), fingerprint.begin(), fingerprint.end());
  append32(lane);
  return hmacSha256(secret, msg);
}

std::string describeFingerprintMismatch(int node_a, const std::string& text_a, int node_b,
                                        const std::string& text_b) {
  auto a = keyValues(text_a);
  auto b = keyValues(text_b);
  std::string out;
  auto add = [&](const std::string& key, const std::string& va, const std::string& vb) {
    if (!out.empty()) out += "; ";
    out += fmt::format("{}: node {} has '{}', node {} has '{}'", key, node_a, va, node_b, vb);
  };
  for (const auto& [key, va] : a) {
    auto it = b.find(key);
    std::string vb = it == b.end() ? "(none)" : it->second;
    if (va != vb) add(key, va, vb);
  }
  for (const auto& [key, vb] : b) {
    if (!a.contains(key)) add(key, "(none)", vb);
  }
  if (out.empty()) out = "the fingerprint texts agree but the hashes differ";
  return out;
}

Handshake::Handshake(HandshakeConfig config, const Nonce& nonce)
    : config_(std::move(config)), nonce_(nonce) {}

std::vector<uint8_t> Handshake::start() {
  started_ = true;
  Hello h;
  h.node_id = static_cast<uint32_t>(config_.node_id);
  h.node_count = static_cast<uint32_t>(config_.node_count);
  h.lane = static_cast<uint32_t>(config_.lane);
  h.lanes = static_cast<uint32_t>(config_.lanes);
  h.auth = !config_.secret.empty();
  h.fingerprint = config_.fingerprint;
  h.nonce = nonce_;
  h.fingerprint_text = config_.fingerprint_text;
  return controlFrame(FrameType::kHello, encodeHello(h));
}

std::vector<uint8_t> Handshake::refuse(ErrorCode code, std::string reason) {
  state_ = State::kFailed;
  error_code_ = code;
  error_ = reason;
  return controlFrame(FrameType::kRefuse, encodeRefusal(Refusal{code, std::move(reason)}));
}

std::vector<uint8_t> Handshake::abort(const Error& error) {
  if (state_ == State::kDone || state_ == State::kFailed) return {};
  bool tell = error.code() == ErrorCode::kMismatch || error.code() == ErrorCode::kInvalidData;
  auto bytes = refuse(error.code(), error.what());
  if (!tell) bytes.clear();
  return bytes;
}

std::vector<uint8_t> Handshake::onFrame(FrameType type, std::span<const uint8_t> payload) {
  if (state_ == State::kDone || state_ == State::kFailed) return {};
  if (!started_) return refuse(ErrorCode::kInternal, "handshake fed before start()");
  try {
    if (type == FrameType::kRefuse) {
      Refusal r = decodeRefusal(payload);
      state_ = State::kFailed;
      refused_by_peer_ = true;
      error_code_ = r.code;
      error_ = r.reason;
      return {};
    }
    if (type == FrameType::kHello && state_ == State::kAwaitHello) return onHello(payload);
    if (type == FrameType::kAuth && state_ == State::kAwaitAuth) return onAuth(payload);
    if (type == FrameType::kAccept && state_ == State::kAwaitAccept) {
      state_ = State::kDone;
      return {};
    }
    return refuse(ErrorCode::kInvalidData,
                  fmt::format("handshake: unexpected {} frame", frameTypeName(type)));
  } catch (const Error& e) {
    return refuse(e.code(), e.what());
  }
}

std::string Handshake::checkHello(const Hello& h) const {
  const int me = config_.node_id;
  const int count = config_.node_count;
  if (h.node_count != static_cast<uint32_t>(count)) {
    return fmt::format("node count: node {} has {}, node {} has {} (compare --peers)", me, count,
                       h.node_id, h.node_count);
  }
  if (h.node_id >= static_cast<uint32_t>(count)) {
    return fmt::format("node id: the peer says it is node {}, but there are only {} nodes",
                       h.node_id, count);
  }
  const int peer = static_cast<int>(h.node_id);
  if (peer == me) return fmt::format("duplicate node id: the peer says it is node {} too", me);
  if (config_.expected_peer >= 0 && peer != config_.expected_peer) {
    return fmt::format("node id: node {} dialed node {} but the peer says it is node {}", me,
                       config_.expected_peer, peer);
  }
  if (h.lanes != static_cast<uint32_t>(config_.lanes) || h.lane >= h.lanes) {
    return fmt::format("sockets per peer: node {} has {}, node {} has {} (socket {})", me,
                       config_.lanes, peer, h.lanes, h.lane);
  }
  if (h.fingerprint != config_.fingerprint) {
    return "cluster fingerprint differs: " +
           describeFingerprintMismatch(me, config_.fingerprint_text, peer, h.fingerprint_text);
  }
  bool auth = !config_.secret.empty();
  if (h.auth != auth) {
    return fmt::format("cluster secret: node {} has {}, node {} has {}", me, auth ? "one" : "none",
                       peer, h.auth ? "one" : "none");
  }
  return {};
}

std::vector<uint8_t> Handshake::onHello(std::span<const uint8_t> payload) {
  Hello h = decodeHello(payload);
  if (h.node_id < static_cast<uint32_t>(config_.node_count)) {
    claimed_peer_ = static_cast<int>(h.node_id);
  }
  std::string why = checkHello(h);
  if (!why.empty()) {
    bool duplicate = why.starts_with("duplicate");
    return refuse(duplicate ? ErrorCode::kInvalidArgument : ErrorCode::kMismatch, why);
  }
  if (config_.expected_peer < 0 && config_.admit) {
    why = config_.admit(static_cast<int>(h.node_id), static_cast<int>(h.lane));
    if (!why.empty()) return refuse(ErrorCode::kInvalidArgument, why);
  }
  peer_id_ = static_cast<int>(h.node_id);
  peer_nonce_ = h.nonce;
  // The dialer names the lane; the acceptor's HELLO carries lane 0, which means nothing.
  lane_ = config_.expected_peer >= 0 ? static_cast<uint32_t>(config_.lane) : h.lane;
  state_ = State::kAwaitAuth;
  if (config_.secret.empty()) return controlFrame(FrameType::kAuth, {});
  Digest mac =
      authMac(config_.secret, static_cast<uint32_t>(config_.node_id),
              static_cast<uint32_t>(peer_id_), peer_nonce_, nonce_, config_.fingerprint, lane_);
  return controlFrame(FrameType::kAuth, mac);
}

std::vector<uint8_t> Handshake::onAuth(std::span<const uint8_t> payload) {
  if (!config_.secret.empty()) {
    Digest expected = authMac(config_.secret, static_cast<uint32_t>(peer_id_),
                              static_cast<uint32_t>(config_.node_id), nonce_, peer_nonce_,
                              config_.fingerprint, lane_);
    if (!constantTimeEqual(payload, expected)) {
      return refuse(ErrorCode::kAuth,
                    fmt::format("cluster secret: node {} failed the HMAC challenge of node {} "
                                "(the two nodes have different secrets)",
                                peer_id_, config_.node_id));
    }
  } else if (!payload.empty()) {
    return refuse(ErrorCode::kInvalidData, "AUTH: a proof was sent but no secret is in use");
  }
  state_ = State::kAwaitAccept;
  return controlFrame(FrameType::kAccept, {});
}

}  // namespace tpnode::mesh
