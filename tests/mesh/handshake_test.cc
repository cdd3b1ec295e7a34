#include "mesh/handshake.h"

#include <gtest/gtest.h>

#include <deque>

namespace tpnode::mesh {
namespace {

struct Wire {
  FrameType type;
  std::vector<uint8_t> payload;
};

// Splits encoded bytes into frames, checking each header like the connector does.
std::deque<Wire> frames(const std::vector<uint8_t>& bytes) {
  std::deque<Wire> out;
  size_t pos = 0;
  while (pos < bytes.size()) {
    FrameHeader h = decodeFrameHeader(ConstHeaderBytes(&bytes[pos], kFrameHeaderSize), 0);
    pos += kFrameHeaderSize;
    out.push_back(
        {h.type, std::vector<uint8_t>(bytes.begin() + static_cast<long>(pos),
                                      bytes.begin() + static_cast<long>(pos + h.length))});
    pos += h.length;
  }
  return out;
}

Nonce nonce(uint8_t seed) {
  Nonce n{};
  n.fill(seed);
  return n;
}

HandshakeConfig config(int id, int expected, std::string secret = "s3cret") {
  HandshakeConfig c;
  c.node_id = id;
  c.node_count = 3;
  c.lanes = 1;
  c.fingerprint_text = fingerprintText({"peers=a:1,b:2,c:3", "tp=1"});
  c.fingerprint = computeFingerprint({"peers=a:1,b:2,c:3", "tp=1"});
  c.secret = std::move(secret);
  c.expected_peer = expected;
  return c;
}

// Runs two machines against each other until neither has anything to say.
void exchange(Handshake& a, Handshake& b) {
  std::deque<Wire> to_b = frames(a.start());
  std::deque<Wire> to_a = frames(b.start());
  for (int steps = 0; steps < 20 && (!to_a.empty() || !to_b.empty()); ++steps) {
    if (!to_b.empty()) {
      Wire w = to_b.front();
      to_b.pop_front();
      for (auto& f : frames(b.onFrame(w.type, w.payload))) to_a.push_back(f);
    }
    if (!to_a.empty()) {
      Wire w = to_a.front();
      to_a.pop_front();
      for (auto& f : frames(a.onFrame(w.type, w.payload))) to_b.push_back(f);
    }
  }
}

TEST(HandshakeTest, TwoNodesWithTheSameSecretConnect) {
  Handshake dialer(config(2, 0), nonce(1));
  Handshake acceptor(config(0, -1), nonce(2));
  exchange(dialer, acceptor);
  EXPECT_EQ(dialer.state(), Handshake::State::kDone) << dialer.error();
  EXPECT_EQ(acceptor.state(), Handshake::State::kDone) << acceptor.error();
  EXPECT_EQ(dialer.peerId(), 0);
  EXPECT_EQ(acceptor.peerId(), 2);
  EXPECT_TRUE(dialer.peerAuthenticated());
  EXPECT_TRUE(acceptor.peerAuthenticated());
}

TEST(HandshakeTest, ConnectsWithoutASecretButNobodyIsAuthenticated) {
  Handshake dialer(config(1, 0, ""), nonce(1));
  Handshake acceptor(config(0, -1, ""), nonce(2));
  exchange(dialer, acceptor);
  EXPECT_EQ(dialer.state(), Handshake::State::kDone);
  EXPECT_EQ(acceptor.state(), Handshake::State::kDone);
  EXPECT_FALSE(acceptor.peerAuthenticated());
}

TEST(HandshakeTest, TheAcceptorSaysNothingButANonceBeforeTheDialerProvesItself) {
  Handshake acceptor(config(0, -1), nonce(2));
  auto first = frames(acceptor.start());
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].type, FrameType::kChallenge);
  EXPECT_EQ(first[0].payload, std::vector<uint8_t>(32, 2));  // the nonce, nothing else
  Handshake dialer(config(1, 0), nonce(1));
  EXPECT_TRUE(dialer.start().empty());  // the dialer waits for the challenge
}

TEST(HandshakeTest, AWrongProofGetsNoProofFingerprintOrDetailBack) {
  HandshakeConfig acc = config(0, -1);
  bool admit_called = false;
  acc.admit = [&](int, int) {
    admit_called = true;
    return std::string();
  };
  Handshake acceptor(acc, nonce(2));
  Handshake impostor(config(1, 0, "guess"), nonce(1));
  auto challenge = frames(acceptor.start());
  impostor.start();
  auto hello = frames(impostor.onFrame(challenge[0].type, challenge[0].payload));
  ASSERT_EQ(hello.size(), 1u);
  auto reply = frames(acceptor.onFrame(hello[0].type, hello[0].payload));
  ASSERT_EQ(reply.size(), 1u);
  EXPECT_EQ(reply[0].type, FrameType::kRefuse);  // not WELCOME: no proof to guess from
  EXPECT_FALSE(admit_called);                    // no slot reserved
  EXPECT_EQ(acceptor.errorCode(), ErrorCode::kAuth);
  EXPECT_NE(acceptor.error().find("failed the HMAC challenge"), std::string::npos);
  Refusal r = decodeRefusal(reply[0].payload);
  const Fingerprint fp = config(0, -1).fingerprint;
  std::string text(reply[0].payload.begin(), reply[0].payload.end());
  EXPECT_EQ(text.find("peers="), std::string::npos) << r.reason;
  EXPECT_EQ(text.find(fingerprintHex(fp).substr(0, 16)), std::string::npos);
  EXPECT_EQ(r.reason.find("node 0"), std::string::npos) << r.reason;
  EXPECT_EQ(r.reason.find('3'), std::string::npos) << r.reason;  // the node count
}

TEST(HandshakeTest, WrongSecretFailsOnBothSides) {
  Handshake dialer(config(1, 0, "wrong"), nonce(1));
  Handshake acceptor(config(0, -1), nonce(2));
  exchange(dialer, acceptor);
  EXPECT_EQ(dialer.state(), Handshake::State::kFailed);
  EXPECT_EQ(acceptor.state(), Handshake::State::kFailed);
  EXPECT_EQ(acceptor.errorCode(), ErrorCode::kAuth);
  EXPECT_NE(acceptor.error().find("cluster secret"), std::string::npos) << acceptor.error();
  EXPECT_EQ(dialer.errorCode(), ErrorCode::kAuth);
  EXPECT_TRUE(dialer.refusedByPeer());
}

TEST(HandshakeTest, AnAcceptorWithTheWrongSecretIsRefusedByTheDialer) {
  // The dialer proved itself first; a WELCOME with a bad proof is refused.
  HandshakeConfig acc = config(0, -1);
  Handshake acceptor(acc, nonce(2));
  Handshake dialer(config(1, 0), nonce(1));
  auto challenge = frames(acceptor.start());
  dialer.start();
  auto hello = frames(dialer.onFrame(challenge[0].type, challenge[0].payload));
  auto welcome = frames(acceptor.onFrame(hello[0].type, hello[0].payload));
  ASSERT_EQ(welcome[0].type, FrameType::kWelcome);
  Welcome w = decodeWelcome(welcome[0].payload);
  w.proof[0] ^= 1;
  auto reply = frames(dialer.onFrame(FrameType::kWelcome, encodeWelcome(w)));
  EXPECT_EQ(dialer.state(), Handshake::State::kFailed);
  EXPECT_EQ(dialer.errorCode(), ErrorCode::kAuth);
  ASSERT_EQ(reply.size(), 1u);
  EXPECT_EQ(reply[0].type, FrameType::kRefuse);
}

TEST(HandshakeTest, SecretOnOneSideOnlyIsRefusedNamingBoth) {
  Handshake dialer(config(1, 0, ""), nonce(1));
  Handshake acceptor(config(0, -1), nonce(2));
  exchange(dialer, acceptor);
  EXPECT_EQ(acceptor.state(), Handshake::State::kFailed);
  EXPECT_NE(acceptor.error().find("node 0 has one, node 1 has none"), std::string::npos)
      << acceptor.error();
}

TEST(HandshakeTest, FingerprintMismatchNamesTheFieldAndBothValues) {
  HandshakeConfig other = config(1, 0);
  other.fingerprint_text = fingerprintText({"peers=a:1,b:2,c:3", "tp=2"});
  other.fingerprint = computeFingerprint({"peers=a:1,b:2,c:3", "tp=2"});
  Handshake dialer(other, nonce(1));
  Handshake acceptor(config(0, -1), nonce(2));
  exchange(dialer, acceptor);
  for (Handshake* h : {&dialer, &acceptor}) {
    EXPECT_EQ(h->state(), Handshake::State::kFailed);
    EXPECT_EQ(h->errorCode(), ErrorCode::kMismatch);
  }
  // The dialer compares (it has both texts once the acceptor proved itself) and tells the
  // acceptor.
  EXPECT_NE(dialer.error().find("tp: node 1 has '2', node 0 has '1'"), std::string::npos)
      << dialer.error();
  EXPECT_NE(acceptor.error().find("tp: node 1 has '2', node 0 has '1'"), std::string::npos)
      << acceptor.error();
}

TEST(HandshakeTest, NodeCountMismatchIsRefused) {
  HandshakeConfig other = config(1, 0);
  other.node_count = 4;
  Handshake dialer(other, nonce(1));
  Handshake acceptor(config(0, -1), nonce(2));
  exchange(dialer, acceptor);
  EXPECT_EQ(acceptor.state(), Handshake::State::kFailed);
  EXPECT_NE(acceptor.error().find("node count: node 0 has 3, node 1 has 4"), std::string::npos);
}

TEST(HandshakeTest, DuplicateIdIsRefusedThroughAdmit) {
  HandshakeConfig acc = config(0, -1);
  acc.admit = [](int peer, int) { return fmt::format("duplicate node id {}", peer); };
  Handshake dialer(config(2, 0), nonce(1));
  Handshake acceptor(acc, nonce(2));
  exchange(dialer, acceptor);
  EXPECT_EQ(acceptor.state(), Handshake::State::kFailed);
  EXPECT_EQ(dialer.state(), Handshake::State::kFailed);
  EXPECT_TRUE(dialer.refusedByPeer());
  EXPECT_EQ(dialer.error(), "duplicate node id 2");
  EXPECT_FALSE(acceptor.admitted());
}

TEST(HandshakeTest, SameIdAsSelfIsRefused) {
  Handshake dialer(config(0, 0), nonce(1));
  Handshake acceptor(config(0, -1), nonce(2));
  exchange(dialer, acceptor);
  EXPECT_EQ(acceptor.state(), Handshake::State::kFailed);
  EXPECT_NE(acceptor.error().find("duplicate node id"), std::string::npos);
}

TEST(HandshakeTest, DialedTheWrongNode) {
  // Node 2 dials what it takes for node 1, but node 0 answers: its proof names node 0, the
  // dialer's names node 1, so the acceptor refuses.
  Handshake dialer(config(2, 1), nonce(1));
  Handshake acceptor(config(0, -1), nonce(2));
  exchange(dialer, acceptor);
  EXPECT_EQ(dialer.state(), Handshake::State::kFailed);
  EXPECT_EQ(acceptor.state(), Handshake::State::kFailed);
  // Without a secret the WELCOME's node id gives it away.
  Handshake d2(config(2, 1, ""), nonce(1));
  Handshake a2(config(0, -1, ""), nonce(2));
  exchange(d2, a2);
  EXPECT_EQ(d2.state(), Handshake::State::kFailed);
  EXPECT_NE(d2.error().find("dialed node 1"), std::string::npos) << d2.error();
}

TEST(HandshakeTest, ARecordedHelloDoesNotVerifyAgainstAFreshChallenge) {
  // Session 1: record the dialer's HELLO (with its proof).
  Handshake d1(config(1, 0), nonce(1));
  Handshake a1(config(0, -1), nonce(2));
  auto challenge = frames(a1.start());
  d1.start();
  auto hello = frames(d1.onFrame(challenge[0].type, challenge[0].payload));
  ASSERT_EQ(hello[0].type, FrameType::kHello);
  // Session 2: an attacker replays it to an acceptor whose challenge is new.
  Handshake a2(config(0, -1), nonce(3));
  a2.start();
  auto reply = frames(a2.onFrame(hello[0].type, hello[0].payload));
  EXPECT_EQ(a2.state(), Handshake::State::kFailed);
  EXPECT_EQ(a2.errorCode(), ErrorCode::kAuth);
  ASSERT_EQ(reply.size(), 1u);
  EXPECT_EQ(reply[0].type, FrameType::kRefuse);
}

TEST(HandshakeTest, ProofsBindEveryInput) {
  Hello h;
  h.node_id = 1;
  h.node_count = 2;
  h.lanes = 2;
  h.nonce = nonce(1);
  const Nonce an = nonce(2);
  Digest base = joinProof("k", h, 0, an);
  EXPECT_NE(base, joinProof("k2", h, 0, an));
  EXPECT_NE(base, joinProof("k", h, 1, an));
  EXPECT_NE(base, joinProof("k", h, 0, nonce(3)));
  for (uint32_t Hello::*field :
       {&Hello::node_id, &Hello::node_count, &Hello::lane, &Hello::lanes}) {
    Hello changed = h;
    changed.*field += 1;
    EXPECT_NE(base, joinProof("k", changed, 0, an));
  }
  Welcome w;
  w.node_id = 0;
  w.fingerprint_text = "tp=1\n";
  Digest wb = welcomeProof("k", w, 1, 0, h.nonce, an);
  EXPECT_NE(wb, welcomeProof("k", w, 1, 1, h.nonce, an));
  EXPECT_NE(wb, welcomeProof("k", w, 1, 0, an, h.nonce));
  Welcome w2 = w;
  w2.fingerprint_text = "tp=2\n";
  EXPECT_NE(wb, welcomeProof("k", w2, 1, 0, h.nonce, an));
  w2 = w;
  w2.fingerprint[0] = 1;
  EXPECT_NE(wb, welcomeProof("k", w2, 1, 0, h.nonce, an));
}

TEST(HandshakeTest, TlsCertificateMustNameTheClaimedNode) {
  // The acceptor's view: the dialer's certificate names node 2, the dialer claims node 1.
  HandshakeConfig acc = config(0, -1, "");
  acc.peer_cert_nodes = {2};
  HandshakeConfig dial = config(1, 0, "");
  dial.peer_cert_nodes = {0};
  Handshake acceptor(acc, nonce(2));
  Handshake dialer(dial, nonce(1));
  exchange(dialer, acceptor);
  EXPECT_EQ(acceptor.state(), Handshake::State::kFailed);
  EXPECT_EQ(acceptor.errorCode(), ErrorCode::kAuth);
  EXPECT_NE(acceptor.error().find("tpnode-node-1"), std::string::npos) << acceptor.error();
  // The dialer's view: the acceptor's certificate does not name the node dialed.
  HandshakeConfig dial2 = config(1, 0, "");
  dial2.peer_cert_nodes = {2};
  Handshake a2(config(0, -1, ""), nonce(2));
  Handshake d2(dial2, nonce(1));
  exchange(d2, a2);
  EXPECT_EQ(d2.state(), Handshake::State::kFailed);
  EXPECT_EQ(d2.errorCode(), ErrorCode::kAuth);
  // A certificate that names no node at all.
  HandshakeConfig acc3 = config(0, -1, "");
  acc3.peer_cert_nodes = {};
  Handshake a3(acc3, nonce(2));
  Handshake d3(dial, nonce(1));
  exchange(d3, a3);
  EXPECT_EQ(a3.state(), Handshake::State::kFailed);
}

TEST(HandshakeTest, TlsCertificatesNamingTheNodesAuthenticateWithoutASecret) {
  HandshakeConfig acc = config(0, -1, "");
  acc.peer_cert_nodes = {1, 2};  // one certificate may name several nodes
  HandshakeConfig dial = config(1, 0, "");
  dial.peer_cert_nodes = {0};
  Handshake acceptor(acc, nonce(2));
  Handshake dialer(dial, nonce(1));
  exchange(dialer, acceptor);
  EXPECT_EQ(acceptor.state(), Handshake::State::kDone) << acceptor.error();
  EXPECT_EQ(dialer.state(), Handshake::State::kDone) << dialer.error();
  EXPECT_TRUE(acceptor.peerAuthenticated());
  EXPECT_TRUE(dialer.peerAuthenticated());
}

TEST(HandshakeTest, CertificateNamesParse) {
  EXPECT_EQ(nodeIdOfCertName("tpnode-node-0"), 0);
  EXPECT_EQ(nodeIdOfCertName("tpnode-node-17"), 17);
  for (const char* bad : {"tpnode-node-", "tpnode-node-01", "tpnode-node--1", "tpnode-node-1x",
                          "tpnode-node-1.example", "node-1", "tpnode-node-9999999", ""}) {
    EXPECT_EQ(nodeIdOfCertName(bad), -1) << bad;
  }
}

TEST(HandshakeTest, UnexpectedFramesFailTheHandshake) {
  Handshake h(config(0, -1), nonce(1));
  h.start();
  auto out = frames(h.onFrame(FrameType::kAccept, {}));
  EXPECT_EQ(h.state(), Handshake::State::kFailed);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type, FrameType::kRefuse);
}

TEST(HandshakeTest, MalformedHelloIsInvalidData) {
  Handshake h(config(0, -1), nonce(1));
  h.start();
  std::vector<uint8_t> junk(40, 0xff);
  h.onFrame(FrameType::kHello, junk);
  EXPECT_EQ(h.state(), Handshake::State::kFailed);
  EXPECT_EQ(h.errorCode(), ErrorCode::kInvalidData);
}

TEST(HandshakeTest, HelloAndWelcomeRoundTripAndRejectBadBytes) {
  Hello hello;
  hello.node_id = 3;
  hello.node_count = 4;
  hello.lane = 1;
  hello.lanes = 2;
  hello.auth = true;
  hello.nonce = nonce(9);
  hello.proof.fill(7);
  auto bytes = encodeHello(hello);
  Hello d = decodeHello(bytes);
  EXPECT_EQ(d.node_id, 3u);
  EXPECT_EQ(d.lanes, 2u);
  EXPECT_TRUE(d.auth);
  EXPECT_EQ(d.nonce, hello.nonce);
  EXPECT_EQ(d.proof, hello.proof);
  bytes.pop_back();
  EXPECT_THROW(decodeHello(bytes), Error);  // the proof is cut short
  Welcome w;
  w.node_id = 1;
  w.auth = true;
  w.proof.fill(3);
  w.fingerprint_text = "tp=1\n";
  auto wb = encodeWelcome(w);
  Welcome wd = decodeWelcome(wb);
  EXPECT_EQ(wd.proof, w.proof);
  EXPECT_EQ(wd.fingerprint_text, "tp=1\n");
  wb.back() = 0x01;
  EXPECT_THROW(decodeWelcome(wb), Error);
  wb.pop_back();
  EXPECT_THROW(decodeWelcome(wb), Error);  // length field no longer matches
}

TEST(HandshakeTest, RefusalRoundTripsAndIsSanitized) {
  auto bytes = encodeRefusal(Refusal{ErrorCode::kAuth, "bad\x01secret"});
  Refusal r = decodeRefusal(bytes);
  EXPECT_EQ(r.code, ErrorCode::kAuth);
  EXPECT_EQ(r.reason, "bad?secret");
  bytes[0] = 0xff;
  EXPECT_THROW(decodeRefusal(bytes), Error);
}

TEST(HandshakeTest, PeerCannotReportAnInternalErrorOfOurs) {
  // Regression for a fuzzer crash: a REFUSE carrying kInternal used to leave the local handshake
  // failed with kInternal, which means "a bug in tpnode" here.
  auto bytes = encodeRefusal(Refusal{ErrorCode::kInternal, "boom"});
  EXPECT_THROW(decodeRefusal(bytes), Error);
  Handshake hs(config(0, -1), nonce(3));
  hs.start();
  try {
    hs.onFrame(FrameType::kRefuse, bytes);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidData);
    hs.abort(e);
  }
  EXPECT_EQ(hs.state(), Handshake::State::kFailed);
  EXPECT_NE(hs.errorCode(), ErrorCode::kInternal);
}

TEST(FingerprintTest, DependsOnEveryItemAndOrder) {
  auto a = computeFingerprint({"peers=a:1", "tp=1"});
  EXPECT_EQ(a, computeFingerprint({"peers=a:1", "tp=1"}));
  EXPECT_NE(a, computeFingerprint({"peers=a:1", "tp=2"}));
  EXPECT_NE(a, computeFingerprint({"tp=1", "peers=a:1"}));
  EXPECT_EQ(fingerprintHex(a).size(), 64u);
  EXPECT_THROW(computeFingerprint({"no equals sign"}), Error);
}

}  // namespace
}  // namespace tpnode::mesh
