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
}

TEST(HandshakeTest, ConnectsWithoutASecret) {
  Handshake dialer(config(1, 0, ""), nonce(1));
  Handshake acceptor(config(0, -1, ""), nonce(2));
  exchange(dialer, acceptor);
  EXPECT_EQ(dialer.state(), Handshake::State::kDone);
  EXPECT_EQ(acceptor.state(), Handshake::State::kDone);
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
  EXPECT_NE(acceptor.error().find("tp: node 0 has '1', node 1 has '2'"), std::string::npos)
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
}

TEST(HandshakeTest, SameIdAsSelfIsRefused) {
  Handshake dialer(config(0, 0), nonce(1));
  Handshake acceptor(config(0, -1), nonce(2));
  exchange(dialer, acceptor);
  EXPECT_EQ(acceptor.state(), Handshake::State::kFailed);
  EXPECT_NE(acceptor.error().find("duplicate node id"), std::string::npos);
}

TEST(HandshakeTest, DialedTheWrongNode) {
  Handshake dialer(config(2, 1), nonce(1));
  Handshake acceptor(config(0, -1), nonce(2));
  exchange(dialer, acceptor);
  EXPECT_EQ(dialer.state(), Handshake::State::kFailed);
  EXPECT_NE(dialer.error().find("dialed node 1"), std::string::npos);
}

TEST(HandshakeTest, ARecordedAuthDoesNotVerifyAgainstAFreshNonce) {
  // Session 1: record the dialer's AUTH.
  Handshake d1(config(1, 0), nonce(1));
  Handshake a1(config(0, -1), nonce(2));
  auto a1_hello = frames(a1.start());
  d1.start();
  auto d1_auth = frames(d1.onFrame(a1_hello[0].type, a1_hello[0].payload));
  ASSERT_EQ(d1_auth[0].type, FrameType::kAuth);
  // Session 2: an attacker replays the recorded HELLO and AUTH to an acceptor with a new nonce.
  Handshake d_rec(config(1, 0), nonce(1));
  auto replay_hello = frames(d_rec.start());
  Handshake a2(config(0, -1), nonce(3));
  a2.start();
  a2.onFrame(replay_hello[0].type, replay_hello[0].payload);
  ASSERT_EQ(a2.state(), Handshake::State::kAwaitAuth);
  auto reply = frames(a2.onFrame(d1_auth[0].type, d1_auth[0].payload));
  EXPECT_EQ(a2.state(), Handshake::State::kFailed);
  EXPECT_EQ(a2.errorCode(), ErrorCode::kAuth);
  ASSERT_EQ(reply.size(), 1u);
  EXPECT_EQ(reply[0].type, FrameType::kRefuse);
}

TEST(HandshakeTest, AuthMacBindsEveryInput) {
  Nonce n1 = nonce(1), n2 = nonce(2);
  Fingerprint fp{};
  Digest base = authMac("k", 1, 0, n1, n2, fp, 0);
  EXPECT_NE(base, authMac("k2", 1, 0, n1, n2, fp, 0));
  EXPECT_NE(base, authMac("k", 0, 1, n1, n2, fp, 0));  // reflection
  EXPECT_NE(base, authMac("k", 1, 0, n2, n1, fp, 0));
  fp[0] = 1;
  EXPECT_NE(base, authMac("k", 1, 0, n1, n2, fp, 0));
  EXPECT_NE(base, authMac("k", 1, 0, n1, n2, Fingerprint{}, 1));
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

TEST(HandshakeTest, HelloRoundTripsAndRejectsBadText) {
  Hello hello;
  hello.node_id = 3;
  hello.node_count = 4;
  hello.lane = 1;
  hello.lanes = 2;
  hello.auth = true;
  hello.nonce = nonce(9);
  hello.fingerprint_text = "tp=1\n";
  auto bytes = encodeHello(hello);
  Hello d = decodeHello(bytes);
  EXPECT_EQ(d.node_id, 3u);
  EXPECT_EQ(d.lanes, 2u);
  EXPECT_TRUE(d.auth);
  EXPECT_EQ(d.nonce, hello.nonce);
  EXPECT_EQ(d.fingerprint_text, "tp=1\n");
  bytes.back() = 0x01;
  EXPECT_THROW(decodeHello(bytes), Error);
  bytes.pop_back();
  EXPECT_THROW(decodeHello(bytes), Error);  // length field no longer matches
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
