// The mesh with every node as a thread of this process, over real loopback sockets.
#include "mesh/mesh.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <future>
#include <numeric>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/error.h"
#include "free_ports.h"

namespace tpnode::mesh {
namespace {

using Bytes = std::vector<std::byte>;

// spdlog's registry is created on first use; create it before any mesh thread does (its
// shared library is not instrumented, so ThreadSanitizer would flag that first use).
const bool kLoggerReady = spdlog::default_logger() != nullptr;

MeshOptions options(int id, const std::string& peers, int lanes = 1) {
  MeshOptions o;
  o.node_id = id;
  o.peers = parsePeerList(peers);
  o.connect_timeout = std::chrono::seconds(20);
  o.sockets_per_peer = lanes;
  o.cluster_secret = "mesh-test-secret-of-32-bytes-ok!";
  o.fingerprint_text = fingerprintText({"peers=" + peers});
  o.fingerprint = computeFingerprint({"peers=" + peers});
  return o;
}

// Connects n meshes, one per thread, and returns them.
std::vector<std::unique_ptr<Mesh>> connectAll(int n, int lanes = 1,
                                              std::function<void(MeshOptions&)> edit = {}) {
  std::string peers = test::loopbackPeers(n);
  std::vector<std::future<std::unique_ptr<Mesh>>> futures;
  for (int i = n - 1; i >= 0; --i) {
    MeshOptions o = options(i, peers, lanes);
    if (edit) edit(o);
    futures.push_back(std::async(std::launch::async, [o] { return Mesh::connect(o); }));
  }
  std::vector<std::unique_ptr<Mesh>> meshes(static_cast<size_t>(n));
  for (auto& f : futures) {
    auto m = f.get();
    meshes[static_cast<size_t>(m->nodeId())] = std::move(m);
  }
  return meshes;
}

Bytes pattern(size_t size, int seed) {
  Bytes b(size);
  for (size_t i = 0; i < size; ++i) b[i] = static_cast<std::byte>((i * 131 + seed) & 0xff);
  return b;
}

TEST(MeshTest, OrderedPerTagAndParkedAcrossTags) {
  auto m = connectAll(2);
  // Node 0 sends tag 17 three times, then tag 16; node 1 receives tag 16 first (parks 17s).
  for (int i = 0; i < 3; ++i) m[0]->send(1, 17, pattern(100 + i, i));
  m[0]->send(1, 16, pattern(7, 9));
  Bytes out(1000);
  EXPECT_EQ(m[1]->recv(0, 16, out), 7u);
  EXPECT_TRUE(std::equal(out.begin(), out.begin() + 7, pattern(7, 9).begin()));
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(m[1]->recv(0, 17, out), 100u + static_cast<size_t>(i));
    Bytes want = pattern(100 + i, i);
    EXPECT_TRUE(std::equal(want.begin(), want.end(), out.begin())) << i;
  }
}

TEST(MeshTest, PostedReceiveGetsTheBytesDirectlyAndLargeMessagesCross) {
  auto m = connectAll(2);
  const size_t size = 24 << 20;
  Bytes a = pattern(size, 1), b = pattern(size, 2), ra(size), rb(size);
  // Both nodes send a large message to each other at the same time: must not deadlock.
  auto t = std::async(std::launch::async, [&] {
    m[1]->send(0, 20, b);
    return m[1]->recv(0, 20, rb);
  });
  auto req = m[0]->irecv(1, 20, ra);
  m[0]->send(1, 20, a);
  EXPECT_EQ(req->wait(), size);
  EXPECT_EQ(t.get(), size);
  EXPECT_EQ(ra, b);
  EXPECT_EQ(rb, a);
}

TEST(MeshTest, ManyThreadsManyTagsThreeNodes) {
  auto m = connectAll(3, 2);
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int node = 0; node < 3; ++node) {
    for (int peer = 0; peer < 3; ++peer) {
      if (peer == node) continue;
      for (uint32_t tag = 16; tag < 20; ++tag) {
        threads.emplace_back([&, node, peer, tag] {
          Bytes out(70000);
          for (int i = 0; i < 50; ++i) {
            size_t size = static_cast<size_t>((i * 977 + tag * 31) % 65536);
            if (node < peer) {
              m[node]->send(peer, tag, pattern(size, i));
              if (m[node]->recv(peer, tag, out) != size) ++errors;
            } else {
              size_t got = m[node]->recv(peer, tag, out);
              if (got != size || !std::equal(out.begin(), out.begin() + static_cast<long>(got),
                                             pattern(size, i).begin())) {
                ++errors;
              }
              m[node]->send(peer, tag, std::span(out.data(), got));
            }
          }
        });
      }
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
}

TEST(MeshTest, ARingOfBlockingLargeSendsCompletesIntact) {
  // Every node sends to its right neighbour first and only then receives from its left one,
  // with messages far larger than the socket buffers. A sender blocked on a full socket drains
  // its other links (parking the frames), so the ring cannot deadlock. (How fast it flows is
  // for tools/meshbench, not for a test.)
  const int n = 3;
  auto m = connectAll(n);
  const size_t size = 24 << 20;
  std::vector<std::future<bool>> done;
  for (int i = 0; i < n; ++i) {
    done.push_back(std::async(std::launch::async, [&, i] {
      Bytes out(size, std::byte(0x10 + i)), in(size), want(size, std::byte(0x10 + (i + n - 1) % n));
      for (int round = 0; round < 3; ++round) {
        m[i]->send((i + 1) % n, 30, out);
        if (m[i]->recv((i + n - 1) % n, 30, in) != size) return false;
        if (std::memcmp(in.data(), want.data(), size) != 0) return false;
      }
      return true;
    }));
  }
  for (auto& d : done) EXPECT_TRUE(d.get());
}

TEST(MeshTest, TooSmallReceiveBufferIsInvalidData) {
  auto m = connectAll(2);
  m[0]->send(1, 16, pattern(100, 0));
  Bytes out(10);
  try {
    m[1]->recv(0, 16, out);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidData);
    EXPECT_NE(std::string(e.what()).find("does not fit"), std::string::npos) << e.what();
  }
}

TEST(MeshTest, ReservedTagsAndBadPeersAreRejected) {
  auto m = connectAll(2);
  Bytes b(8);
  EXPECT_THROW(m[0]->send(1, 1, b), Error);
  EXPECT_THROW(m[0]->send(0, 16, b), Error);
  EXPECT_THROW(m[0]->send(2, 16, b), Error);
}

TEST(MeshTest, LinkStatsMeasuresEveryPeer) {
  auto m = connectAll(3);
  std::vector<std::future<std::vector<LinkStats>>> f;
  for (auto& mesh : m)
    f.push_back(std::async(std::launch::async, [&] { return mesh->linkStats(5); }));
  for (int i = 0; i < 3; ++i) {
    auto stats = f[static_cast<size_t>(i)].get();
    for (int p = 0; p < 3; ++p) {
      if (p == i) continue;
      EXPECT_EQ(stats[static_cast<size_t>(p)].peer, p);
      if (i < p) {
        EXPECT_GT(stats[static_cast<size_t>(p)].rtt_us_median, 0);
      }
    }
  }
}

TEST(MeshTest, OrderlyShutdownIsClosedNotLostAndFailsPendingReceives) {
  auto m = connectAll(2);
  std::atomic<int> closed{0}, lost{0};
  m[1]->setEventCallback(
      [&](const PeerEvent& e) { (e.kind == PeerEventKind::kClosed ? closed : lost)++; });
  Bytes out(8);
  auto pending = std::async(std::launch::async, [&] {
    try {
      m[1]->recv(0, 16, out);
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::kInternal;
  });
  m[0]->shutdown();
  EXPECT_EQ(pending.get(), ErrorCode::kPeerLost);
  EXPECT_FALSE(m[1]->peerAlive(0));
  EXPECT_EQ(closed.load(), 1);
  EXPECT_EQ(lost.load(), 0);
}

// What a peer sent before its GOODBYE is still received, on every lane, however late the
// receive comes: node 0 sends one message per lane (tags 16-19 over 4 lanes) and shuts down;
// node 1 receives them only after its liveness thread has read every lane to its GOODBYE.
// Then a receive throws kPeerLost, and the peer was reported closed once. (A GOODBYE read on
// one lane used to close all of the peer's lanes, dropping messages still in their sockets,
// and a receive posted after the close ignored the frames parked before it.)
TEST(MeshTest, MessagesSentBeforeGoodbyeAreReceivedAfterIt) {
  auto m = connectAll(2, 4);
  std::atomic<int> closed{0}, lost{0};
  m[1]->setEventCallback(
      [&](const PeerEvent& e) { (e.kind == PeerEventKind::kClosed ? closed : lost)++; });
  for (uint32_t tag = 16; tag < 20; ++tag)
    m[0]->send(1, tag, pattern(64 + tag, static_cast<int>(tag)));
  auto bye = std::async(std::launch::async, [&] { m[0]->shutdown(); });
  // The liveness thread drains idle links every tick: wait until it has seen a GOODBYE.
  for (int i = 0; i < 300 && m[1]->peerAlive(0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_FALSE(m[1]->peerAlive(0));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // every lane read to its end
  Bytes out(256);
  for (uint32_t tag = 16; tag < 20; ++tag) {
    ASSERT_EQ(m[1]->recv(0, tag, out), 64u + tag) << "tag " << tag;
    Bytes want = pattern(64 + tag, static_cast<int>(tag));
    EXPECT_TRUE(std::equal(want.begin(), want.end(), out.begin())) << "tag " << tag;
  }
  try {
    m[1]->recv(0, 16, out);
    ADD_FAILURE() << "a receive after the GOODBYE returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kPeerLost);
  }
  m[1]->shutdown();
  bye.get();
  EXPECT_EQ(closed.load(), 1);
  EXPECT_EQ(lost.load(), 0);
}

}  // namespace
}  // namespace tpnode::mesh

namespace tpnode::mesh {
namespace {

// Receives posted while a frame is parked must still be served in post order: a receive
// posted later never overtakes them (found by the collectives' ring: it reordered frames).
TEST(MeshTest, ReceivesPostedWhileFramesAreParkedKeepTheirOrder) {
  auto m = connectAll(2);
  auto msg = [](uint8_t v) { return std::vector<std::byte>(8, std::byte{v}); };
  m[1]->send(0, 20, msg(0));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the liveness thread parks it
  std::vector<std::byte> b0(8), b1(8), b2(8);
  auto op0 = m[0]->irecv(1, 20, b0);
  auto op1 = m[0]->irecv(1, 20, b1);
  EXPECT_EQ(op0->wait(), 8u);
  auto op2 = m[0]->irecv(1, 20, b2);
  m[1]->send(0, 20, msg(1));
  m[1]->send(0, 20, msg(2));
  op2->wait();  // waiting on the later receive first must not steal the earlier one's frame
  op1->wait();
  EXPECT_EQ(b0, msg(0));
  EXPECT_EQ(b1, msg(1));
  EXPECT_EQ(b2, msg(2));
}

}  // namespace
}  // namespace tpnode::mesh
