// One Link over a socketpair, with the other end written by hand: hostile and truncated input
// must fail the link with a reason, never crash, hang or allocate the claimed size.
#include "mesh/link.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>

#include "common/byte_order.h"

namespace tpnode::mesh {
namespace {

struct Harness {
  Harness() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    raw = fds[1];
    LinkOptions o;
    o.peer = 1;
    o.peer_name = "node 1 at test";
    o.max_frame_bytes = 1 << 20;
    o.liveness_timeout = std::chrono::milliseconds(500);
    o.heartbeat_interval = std::chrono::milliseconds(100);
    link = std::make_unique<Link>(makePlainTransport(Fd(fds[0])), o,
                                  [this](PeerEventKind kind, const std::string& reason) {
                                    events.push_back({kind, 1, reason});
                                  });
  }
  ~Harness() {
    link.reset();
    if (raw >= 0) ::close(raw);
  }
  void writeRaw(const std::vector<uint8_t>& bytes) {
    ASSERT_EQ(::write(raw, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }
  std::vector<uint8_t> header(FrameType type, uint32_t tag, uint64_t seq, uint64_t length) {
    std::vector<uint8_t> b(kFrameHeaderSize);
    encodeFrameHeader(FrameHeader{type, tag, seq, length}, HeaderBytes(b.data(), kFrameHeaderSize));
    return b;
  }
  // Receives on tag 16 and returns the error it fails with.
  std::string recvError(ErrorCode expected = ErrorCode::kPeerLost) {
    std::vector<std::byte> out(64);
    try {
      link->recv(16, out);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), expected) << e.what();
      return e.what();
    }
    ADD_FAILURE() << "recv succeeded";
    return {};
  }

  int raw = -1;
  std::unique_ptr<Link> link;
  std::vector<PeerEvent> events;
};

TEST(LinkTest, DeliversAWellFormedFrame) {
  Harness h;
  auto bytes = h.header(FrameType::kData, 16, 0, 3);
  bytes.insert(bytes.end(), {1, 2, 3});
  h.writeRaw(bytes);
  std::vector<std::byte> out(8);
  EXPECT_EQ(h.link->recv(16, out), 3u);
  EXPECT_EQ(out[2], std::byte{3});
}

TEST(LinkTest, BadMagicFailsTheLinkNamingIt) {
  Harness h;
  auto bytes = h.header(FrameType::kData, 16, 0, 0);
  bytes[0] = 'X';
  h.writeRaw(bytes);
  std::string why = h.recvError();
  EXPECT_NE(why.find("magic"), std::string::npos) << why;
  EXPECT_NE(why.find("node 1 at test"), std::string::npos) << why;
  ASSERT_EQ(h.events.size(), 1u);
  EXPECT_EQ(h.events[0].kind, PeerEventKind::kLost);
}

TEST(LinkTest, OversizedFrameFailsWithoutAllocatingIt) {
  Harness h;
  h.writeRaw(h.header(FrameType::kData, 16, 0, uint64_t{1} << 40));
  EXPECT_NE(h.recvError().find("exceeds the limit"), std::string::npos);
}

TEST(LinkTest, SequenceGapFails) {
  Harness h;
  h.writeRaw(h.header(FrameType::kData, 16, 5, 0));
  EXPECT_NE(h.recvError().find("sequence"), std::string::npos);
}

TEST(LinkTest, HandshakeFrameAfterTheHandshakeFails) {
  Harness h;
  h.writeRaw(h.header(FrameType::kAccept, 0, 0, 0));
  EXPECT_NE(h.recvError().find("unexpected ACCEPT"), std::string::npos);
}

TEST(LinkTest, TruncatedFrameThenCloseIsALostPeer) {
  Harness h;
  auto bytes = h.header(FrameType::kData, 16, 0, 50);
  bytes.resize(kFrameHeaderSize + 10);
  h.writeRaw(bytes);
  ::close(h.raw);
  h.raw = -1;
  EXPECT_NE(h.recvError().find("without GOODBYE"), std::string::npos);
}

TEST(LinkTest, GoodbyeIsAnOrderlyClose) {
  Harness h;
  h.writeRaw(h.header(FrameType::kGoodbye, 0, 0, 0));
  EXPECT_NE(h.recvError().find("shut down"), std::string::npos);
  ASSERT_EQ(h.events.size(), 1u);
  EXPECT_EQ(h.events[0].kind, PeerEventKind::kClosed);
}

TEST(LinkTest, SilenceIsDetectedByService) {
  Harness h;
  auto t0 = Clock::now();
  auto pending = std::async(std::launch::async, [&] { return h.recvError(); });
  while (h.link->alive() && Clock::now() - t0 < std::chrono::seconds(5)) {
    h.link->service(Clock::now());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_NE(pending.get().find("silent"), std::string::npos);
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(1500));
}

TEST(LinkTest, HeartbeatsKeepAnIdleLinkAliveAndAreNotDelivered) {
  Harness h;
  for (int i = 0; i < 10; ++i) {
    auto hb = h.header(FrameType::kHeartbeat, 0, 0, 8);
    hb.resize(hb.size() + 8);
    h.writeRaw(hb);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    h.link->service(Clock::now());
  }
  EXPECT_TRUE(h.link->alive());
  auto bytes = h.header(FrameType::kData, 16, 0, 1);
  bytes.push_back(7);
  h.writeRaw(bytes);
  std::vector<std::byte> out(1);
  EXPECT_EQ(h.link->recv(16, out), 1u);
  // The link sent heartbeats of its own while idle.
  std::vector<uint8_t> got(4096);
  ssize_t n = ::recv(h.raw, got.data(), got.size(), MSG_DONTWAIT);
  ASSERT_GE(n, static_cast<ssize_t>(kFrameHeaderSize));
  EXPECT_EQ(got[6], static_cast<uint8_t>(FrameType::kHeartbeat));
}

}  // namespace
}  // namespace tpnode::mesh
