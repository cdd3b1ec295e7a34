// MeteredMesh counts, per peer, the bytes each way, the messages and the time callers were
// blocked, around a stand-in Mesh whose receives block for a known time.
#include "mesh/metered_mesh.h"

#include <gtest/gtest.h>

#include <thread>

#include "common/error.h"

namespace tpnode::mesh {
namespace {

using namespace std::chrono_literals;

class DoneRequest final : public Request {
 public:
  explicit DoneRequest(size_t n) : n_(n) {}
  size_t wait() override {
    std::this_thread::sleep_for(10ms);
    return n_;
  }
  bool test() override { return true; }

 private:
  size_t n_;
};

// Three nodes; this is node 0. Receives take 10 ms and fill the whole buffer; receiving from
// node 2 fails.
class StandInMesh final : public Mesh {
 public:
  int nodeId() const override { return 0; }
  int nodeCount() const override { return 3; }
  void send(int, uint32_t, std::span<const std::byte>) override {}
  size_t recv(int peer, uint32_t, std::span<std::byte> out) override {
    std::this_thread::sleep_for(10ms);
    if (peer == 2) fail(ErrorCode::kPeerLost, "node 2 is gone");
    return out.size();
  }
  std::unique_ptr<Request> isend(int, uint32_t, std::span<const std::byte> data) override {
    return std::make_unique<DoneRequest>(data.size());
  }
  std::unique_ptr<Request> irecv(int, uint32_t, std::span<std::byte> out) override {
    return std::make_unique<DoneRequest>(out.size());
  }
  void setEventCallback(std::function<void(const PeerEvent&)>) override {}
  bool peerAlive(int) const override { return true; }
  void failPeer(int peer, const std::string&) override { failed.push_back(peer); }
  std::vector<LinkStats> linkStats(int) override { return {}; }
  void shutdown() override {}
  std::vector<int> failed;  // failPeer calls, in order
};

TEST(MeteredMeshTest, CountsBytesMessagesAndBlockedTimePerPeer) {
  StandInMesh inner;
  LinkMeters meters(3);
  MeteredMesh m(inner, meters);
  std::vector<std::byte> buf(100);
  m.send(1, 20, std::span<const std::byte>(buf).first(40));
  EXPECT_EQ(m.recv(1, 20, buf), 100u);
  m.irecv(1, 21, std::span<std::byte>(buf).first(30))->wait();
  m.isend(1, 21, std::span<const std::byte>(buf).first(7))->wait();

  const LinkMeter& one = meters.peer(1);
  EXPECT_EQ(one.bytes_sent.load(), 47u);
  EXPECT_EQ(one.bytes_received.load(), 130u);
  EXPECT_EQ(one.messages.load(), 4u);
  EXPECT_GE(one.wait_ns.load(), 30'000'000u);  // recv, irecv's wait and isend's wait slept 10 ms

  EXPECT_THROW(m.recv(2, 20, buf), Error);
  EXPECT_EQ(meters.peer(2).bytes_received.load(), 0u);
  EXPECT_GE(meters.peer(2).wait_ns.load(), 10'000'000u);  // a failed receive still waited
  EXPECT_EQ(meters.peer(0).messages.load(), 0u);

  m.failPeer(2, "a step did not complete");  // the step watchdog reaches the real mesh
  EXPECT_EQ(inner.failed, std::vector<int>{2});
}

TEST(MeteredMeshTest, MetersMustMatchTheMesh) {
  StandInMesh inner;
  LinkMeters wrong(2);
  EXPECT_THROW(MeteredMesh(inner, wrong), Error);
}

}  // namespace
}  // namespace tpnode::mesh
