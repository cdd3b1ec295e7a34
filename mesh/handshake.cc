#include "mesh/handshake.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "common/byte_order.h"

namespace tpnode::mesh {

namespace {

constexpr size_t kHelloFixed = 52;
constexpr size_t kWelcomeFixed = 74;
constexpr std::string_view kJoinDomain = "tpnode-mesh-join-v2";
constexpr std::string_view kWelcomeDomain = "tpnode-mesh-welcome-v2";

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
  std::vector<uint8_t> out(kHelloFixed + (hello.auth ? hello.proof.size() : 0), 0);
  storeLE32(&out[0], hello.node_id);
  storeLE32(&out[4], hello.node_count);
  storeLE32(&out[8], hello.lane);
  storeLE32(&out[12], hello.lanes);
  out[16] = hello.auth ? 1 : 0;
  std::copy(hello.nonce.begin(), hello.nonce.end(), out.begin() + 20);
  if (hello.auth) std::copy(hello.proof.begin(), hello.proof.end(), out.begin() + kHelloFixed);
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
  std::copy_n(p.begin() + 20, 32, h.nonce.begin());
  const size_t expected = kHelloFixed + (h.auth ? h.proof.size() : 0);
  if (p.size() != expected) {
    fail(ErrorCode::kInvalidData, "HELLO of {} bytes, expected {} (auth flag {})", p.size(),
         expected, h.auth ? 1 : 0);
  }
  if (h.auth) std::copy_n(p.begin() + kHelloFixed, h.proof.size(), h.proof.begin());
  return h;
}

std::vector<uint8_t> encodeWelcome(const Welcome& w) {
  size_t text_len = std::min(w.fingerprint_text.size(), kMaxFingerprintText);
  std::vector<uint8_t> out(kWelcomeFixed + text_len, 0);
  storeLE32(&out[0], w.node_id);
  out[4] = w.auth ? 1 : 0;
  if (w.auth) std::copy(w.proof.begin(), w.proof.end(), out.begin() + 8);
  std::copy(w.fingerprint.begin(), w.fingerprint.end(), out.begin() + 40);
  storeLE16(&out[72], static_cast<uint16_t>(text_len));
  std::copy_n(w.fingerprint_text.begin(), text_len, out.begin() + kWelcomeFixed);
  return out;
}

Welcome decodeWelcome(std::span<const uint8_t> p) {
  if (p.size() < kWelcomeFixed) {
    fail(ErrorCode::kInvalidData, "WELCOME of {} bytes, expected at least {}", p.size(),
         kWelcomeFixed);
  }
  Welcome w;
  w.node_id = loadLE32(&p[0]);
  if (p[4] > 1) fail(ErrorCode::kInvalidData, "WELCOME: auth flag {}, expected 0 or 1", p[4]);
  w.auth = p[4] == 1;
  if (p[5] != 0 || p[6] != 0 || p[7] != 0) {
    fail(ErrorCode::kInvalidData, "WELCOME: reserved bytes are not zero");
  }
  std::copy_n(p.begin() + 8, 32, w.proof.begin());
  if (!w.auth && std::any_of(w.proof.begin(), w.proof.end(), [](uint8_t b) { return b != 0; })) {
    fail(ErrorCode::kInvalidData, "WELCOME: a proof without the auth flag");
  }
  std::copy_n(p.begin() + 40, 32, w.fingerprint.begin());
  size_t text_len = loadLE16(&p[72]);
  if (text_len > kMaxFingerprintText || text_len != p.size() - kWelcomeFixed) {
    fail(ErrorCode::kInvalidData, "WELCOME: text length {} does not match the {} bytes sent",
         text_len, p.size() - kWelcomeFixed);
  }
  auto text = p.subspan(kWelcomeFixed);
  for (uint8_t c : text) {
    if ((c < 0x20 || c >= 0x7f) && c != '\n') {
      fail(ErrorCode::kInvalidData, "WELCOME: fingerprint text has a non-printable byte 0x{:02x}",
           c);
    }
  }
  w.fingerprint_text.assign(text.begin(), text.end());
  return w;
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

namespace {

struct MacInput {
  std::vector<uint8_t> bytes;
  explicit MacInput(std::string_view domain) : bytes(domain.begin(), domain.end()) {}
  void u32(uint32_t v) {
    uint8_t b[4];
    storeLE32(b, v);
    bytes.insert(bytes.end(), b, b + 4);
  }
  void raw(std::span<const uint8_t> v) { bytes.insert(bytes.end(), v.begin(), v.end()); }
};

}  // namespace

Digest joinProof(std::string_view secret, const Hello& h, uint32_t acceptor_id,
                 const Nonce& acceptor_nonce) {
  MacInput m(kJoinDomain);
  m.u32(h.node_id);
  m.u32(acceptor_id);
  m.u32(h.node_count);
  m.u32(h.lane);
  m.u32(h.lanes);
  m.raw(acceptor_nonce);
  m.raw(h.nonce);
  return hmacSha256(secret, m.bytes);
}

Digest welcomeProof(std::string_view secret, const Welcome& w, uint32_t dialer_id, uint32_t lane,
                    const Nonce& dialer_nonce, const Nonce& acceptor_nonce) {
  MacInput m(kWelcomeDomain);
  m.u32(w.node_id);
  m.u32(dialer_id);
  m.u32(lane);
  m.raw(dialer_nonce);
  m.raw(acceptor_nonce);
  m.raw(w.fingerprint);
  size_t text_len = std::min(w.fingerprint_text.size(), kMaxFingerprintText);
  m.u32(static_cast<uint32_t>(text_len));
  m.raw(std::span(reinterpret_cast<const uint8_t*>(w.fingerprint_text.data()), text_len));
  return hmacSha256(secret, m.bytes);
}

int nodeIdOfCertName(std::string_view name) {
  constexpr std::string_view kPrefix = "tpnode-node-";
  if (!name.starts_with(kPrefix)) return -1;
  std::string_view digits = name.substr(kPrefix.size());
  if (digits.empty() || digits.size() > 6 || (digits.size() > 1 && digits[0] == '0')) return -1;
  int id = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return -1;
    id = id * 10 + (c - '0');
  }
  return id;
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
  if (dialer()) {
    state_ = State::kAwaitChallenge;
    return {};
  }
  state_ = State::kAwaitHello;
  return controlFrame(FrameType::kChallenge, nonce_);
}

std::vector<uint8_t> Handshake::refuse(ErrorCode code, std::string reason, std::string told) {
  state_ = State::kFailed;
  error_code_ = code;
  error_ = std::move(reason);
  Refusal r{code, told.empty() ? error_ : std::move(told)};
  return controlFrame(FrameType::kRefuse, encodeRefusal(r));
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
    if (type == FrameType::kChallenge && state_ == State::kAwaitChallenge) {
      return onChallenge(payload);
    }
    if (type == FrameType::kHello && state_ == State::kAwaitHello) return onHello(payload);
    if (type == FrameType::kWelcome && state_ == State::kAwaitWelcome) return onWelcome(payload);
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

bool Handshake::certNames(int node) const {
  return std::find(config_.peer_cert_nodes.begin(), config_.peer_cert_nodes.end(), node) !=
         config_.peer_cert_nodes.end();
}

std::vector<uint8_t> Handshake::onChallenge(std::span<const uint8_t> payload) {
  if (payload.size() != peer_nonce_.size()) {
    return refuse(ErrorCode::kInvalidData,
                  fmt::format("CHALLENGE of {} bytes, expected 32", payload.size()));
  }
  std::copy(payload.begin(), payload.end(), peer_nonce_.begin());
  const int peer = config_.expected_peer;
  if (!certNames(kNoCertificate) && !certNames(peer)) {
    // The acceptor is not told why: it has not proved anything yet.
    return refuse(ErrorCode::kAuth,
                  fmt::format("TLS: the certificate of the node at this address does not name "
                              "node {} (it needs CN or DNS SAN tpnode-node-{})",
                              peer, peer),
                  "authentication failed");
  }
  Hello h;
  h.node_id = static_cast<uint32_t>(config_.node_id);
  h.node_count = static_cast<uint32_t>(config_.node_count);
  h.lane = static_cast<uint32_t>(config_.lane);
  h.lanes = static_cast<uint32_t>(config_.lanes);
  h.auth = !config_.secret.empty();
  h.nonce = nonce_;
  if (h.auth) h.proof = joinProof(config_.secret, h, static_cast<uint32_t>(peer), peer_nonce_);
  lane_ = h.lane;
  state_ = State::kAwaitWelcome;
  return controlFrame(FrameType::kHello, encodeHello(h));
}

std::string Handshake::authenticate(const Hello& h) const {
  const int me = config_.node_id;
  const bool tls = !certNames(kNoCertificate);
  if (tls && !certNames(static_cast<int>(h.node_id))) {
    std::string named;
    for (int n : config_.peer_cert_nodes) named += (named.empty() ? "" : ", ") + std::to_string(n);
    return fmt::format(
        "TLS: a peer claims to be node {} but its certificate names {} (it needs CN or DNS SAN "
        "tpnode-node-{})",
        h.node_id, named.empty() ? "no node" : "node(s) " + named, h.node_id);
  }
  const bool secret = !config_.secret.empty();
  if (secret && !h.auth) {
    return fmt::format("cluster secret: node {} has one, node {} has none", me, h.node_id);
  }
  if (!secret && h.auth) {
    return fmt::format("cluster secret: node {} has none, node {} has one", me, h.node_id);
  }
  if (secret) {
    Digest expected = joinProof(config_.secret, h, static_cast<uint32_t>(me), nonce_);
    if (!constantTimeEqual(h.proof, expected)) {
      return fmt::format(
          "cluster secret: a peer claiming node {} failed the HMAC challenge of node {} (the "
          "two nodes have different secrets)",
          h.node_id, me);
    }
  }
  return {};
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
  if (h.lanes != static_cast<uint32_t>(config_.lanes) || h.lane >= h.lanes) {
    return fmt::format("sockets per peer: node {} has {}, node {} has {} (socket {})", me,
                       config_.lanes, peer, h.lanes, h.lane);
  }
  return {};
}

std::vector<uint8_t> Handshake::onHello(std::span<const uint8_t> payload) {
  Hello h = decodeHello(payload);
  if (h.node_id < static_cast<uint32_t>(config_.node_count)) {
    claimed_peer_ = static_cast<int>(h.node_id);
  }
  const bool insecure = config_.secret.empty() && certNames(kNoCertificate);
  std::string why = authenticate(h);
  if (!why.empty()) {
    // Nothing about this node is told to a peer that has not proved itself.
    return refuse(ErrorCode::kAuth, why,
                  "authentication failed: this node refuses peers that do not prove the cluster "
                  "secret (or TLS certificate naming their node id) it expects");
  }
  authenticated_ = !insecure;
  why = checkHello(h);
  if (!why.empty()) {
    bool duplicate = why.starts_with("duplicate");
    return refuse(duplicate ? ErrorCode::kInvalidArgument : ErrorCode::kMismatch, why);
  }
  if (config_.admit) {
    why = config_.admit(static_cast<int>(h.node_id), static_cast<int>(h.lane));
    if (!why.empty()) return refuse(ErrorCode::kInvalidArgument, why);
    admitted_ = true;
  }
  peer_id_ = static_cast<int>(h.node_id);
  peer_nonce_ = h.nonce;
  lane_ = h.lane;
  Welcome w;
  w.node_id = static_cast<uint32_t>(config_.node_id);
  w.auth = !config_.secret.empty();
  w.fingerprint = config_.fingerprint;
  w.fingerprint_text = config_.fingerprint_text;
  if (w.auth) w.proof = welcomeProof(config_.secret, w, h.node_id, lane_, peer_nonce_, nonce_);
  state_ = State::kAwaitAccept;
  return controlFrame(FrameType::kWelcome, encodeWelcome(w));
}

std::vector<uint8_t> Handshake::onWelcome(std::span<const uint8_t> payload) {
  Welcome w = decodeWelcome(payload);
  const int me = config_.node_id;
  const int peer = config_.expected_peer;
  const bool secret = !config_.secret.empty();
  if (w.auth != secret) {
    return refuse(ErrorCode::kAuth,
                  fmt::format("cluster secret: node {} has {}, node {} has {}", me,
                              secret ? "one" : "none", peer, w.auth ? "one" : "none"),
                  "authentication failed");
  }
  if (secret) {
    Digest expected =
        welcomeProof(config_.secret, w, static_cast<uint32_t>(me), lane_, nonce_, peer_nonce_);
    if (!constantTimeEqual(w.proof, expected)) {
      return refuse(ErrorCode::kAuth,
                    fmt::format("cluster secret: node {} failed the HMAC challenge of node {} "
                                "(the two nodes have different secrets)",
                                peer, me),
                    "authentication failed");
    }
  }
  if (w.node_id != static_cast<uint32_t>(peer)) {
    return refuse(ErrorCode::kMismatch,
                  fmt::format("node id: node {} dialed node {} but the peer says it is node {}", me,
                              peer, w.node_id));
  }
  authenticated_ = secret || !certNames(kNoCertificate);
  if (w.fingerprint != config_.fingerprint) {
    return refuse(
        ErrorCode::kMismatch,
        "cluster fingerprint differs: " +
            describeFingerprintMismatch(me, config_.fingerprint_text, peer, w.fingerprint_text));
  }
  peer_id_ = peer;
  state_ = State::kDone;
  return controlFrame(FrameType::kAccept, {});
}

}  // namespace tpnode::mesh
