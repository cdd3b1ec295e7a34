// TagQueues on its own (the reader's and the callers' calls made by hand, in the orders the
// link produces them), then through two Links over a socketpair: waiters blocked on a tag are
// served in post order and woken by a failure.
#include "mesh/tag_queues.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "mesh/link.h"

namespace tpnode::mesh {
namespace {

using State = RecvOp::State;

// A receive with its own buffer.
struct Op {
  explicit Op(uint32_t tag, size_t capacity = 16) : buffer(capacity) {
    op.tag = tag;
    op.out = buffer;
  }
  uint8_t first() const { return static_cast<uint8_t>(buffer[0]); }
  std::vector<std::byte> buffer;
  RecvOp op;
};

// Plays the reader: one whole DATA frame of `length` bytes, each equal to `value`.
void arrive(TagQueues& q, uint32_t tag, uint8_t value, size_t length = 4) {
  TagQueues::Destination d = q.beginFrame(tag, length);
  ASSERT_TRUE(d.misfit.empty()) << d.misfit;
  std::memset(d.data, value, length);
  q.finishFrame(d, length);
}

TEST(TagQueuesTest, PostedReceivesAreFilledInPostOrder) {
  TagQueues q;
  Op a(7), b(7);
  q.post(a.op);
  q.post(b.op);
  EXPECT_EQ(a.op.state, State::kPosted);
  arrive(q, 7, 1);
  arrive(q, 7, 2);
  EXPECT_EQ(a.op.state, State::kDone);
  EXPECT_EQ(b.op.state, State::kDone);
  EXPECT_EQ(a.first(), 1);
  EXPECT_EQ(b.first(), 2);
  EXPECT_EQ(a.op.size, 4u);
}

TEST(TagQueuesTest, EarlyFramesAreParkedAndClaimedInArrivalOrder) {
  TagQueues q;
  arrive(q, 7, 1);
  arrive(q, 7, 2, 6);
  EXPECT_EQ(q.parkedCount(7), 2u);
  Op a(7), b(7), c(7);
  q.post(a.op);
  q.post(b.op);
  EXPECT_EQ(a.op.state, State::kClaiming);
  EXPECT_TRUE(q.servable(a.op));
  TagQueues::Served s = q.serveClaims(7);
  EXPECT_TRUE(s.changed);
  EXPECT_EQ(s.misfit, nullptr);
  EXPECT_EQ(a.first(), 1);
  EXPECT_EQ(b.first(), 2);
  EXPECT_EQ(b.op.size, 6u);
  EXPECT_EQ(q.parkedCount(7), 0u);
  // Nothing parked any more: the next receive waits for the reader.
  q.post(c.op);
  EXPECT_EQ(c.op.state, State::kPosted);
  EXPECT_FALSE(q.servable(c.op));
}

// The ordering bug this class exists to prevent: a receive posted while an earlier claim still
// waits for a half-read parked frame must not take the next frame first.
TEST(TagQueuesTest, ALaterReceiveNeverOvertakesAnEarlierClaim) {
  TagQueues q;
  TagQueues::Destination first = q.beginFrame(7, 4);  // the reader is mid-frame
  Op a(7), b(7);
  q.post(a.op);
  EXPECT_EQ(a.op.state, State::kClaiming);
  EXPECT_FALSE(q.servable(a.op));
  EXPECT_FALSE(q.serveClaims(7).changed);  // stops at the incomplete frame
  q.post(b.op);
  EXPECT_EQ(b.op.state, State::kClaiming);
  std::memset(first.data, 1, 4);
  q.finishFrame(first, 4);
  arrive(q, 7, 2);
  q.serveClaims(7);
  EXPECT_EQ(a.first(), 1);
  EXPECT_EQ(b.first(), 2);
}

TEST(TagQueuesTest, ClaimsLeftWithNothingParkedJoinThePostedListInOrder) {
  TagQueues q;
  arrive(q, 7, 1);
  Op a(7), b(7), c(7);
  q.post(a.op);
  q.post(b.op);
  q.serveClaims(7);
  EXPECT_EQ(a.op.state, State::kDone);
  EXPECT_EQ(b.op.state, State::kPosted);
  q.post(c.op);
  arrive(q, 7, 2);
  arrive(q, 7, 3);
  EXPECT_EQ(b.first(), 2);
  EXPECT_EQ(c.first(), 3);
}

TEST(TagQueuesTest, TagsAreIndependent) {
  TagQueues q;
  arrive(q, 1, 10);  // parked on tag 1
  Op two(2);
  q.post(two.op);
  EXPECT_EQ(two.op.state, State::kPosted);  // tag 1's parked frame does not make it a claim
  arrive(q, 2, 20);
  EXPECT_EQ(two.first(), 20);
  Op one(1);
  q.post(one.op);
  q.serveClaims(1);
  EXPECT_EQ(one.first(), 10);
}

TEST(TagQueuesTest, AFrameLargerThanThePostedReceiveIsAMisfit) {
  TagQueues q;
  Op a(7, 4);
  q.post(a.op);
  TagQueues::Destination d = q.beginFrame(7, 5);
  EXPECT_NE(d.misfit.find("5 bytes on tag 7 does not fit the 4-byte"), std::string::npos)
      << d.misfit;
  EXPECT_EQ(d.data, nullptr);
  EXPECT_EQ(a.op.state, State::kPosted);  // left for the owner's failAll()
}

TEST(TagQueuesTest, AParkedMessageLargerThanTheClaimIsAMisfitAndLeavesTheQueue) {
  TagQueues q;
  arrive(q, 7, 1, 8);
  Op a(7, 4);
  q.post(a.op);
  TagQueues::Served s = q.serveClaims(7);
  EXPECT_EQ(s.misfit, &a.op);
  EXPECT_NE(s.reason.find("8 bytes on tag 7"), std::string::npos) << s.reason;
  EXPECT_EQ(q.parkedCount(7), 0u);
  EXPECT_EQ(q.serveClaims(7).misfit, nullptr);
}

TEST(TagQueuesTest, CancelTakesAReceiveOutOfLine) {
  TagQueues q;
  Op a(7), b(7);
  q.post(a.op);
  q.post(b.op);
  q.cancel(a.op);
  EXPECT_EQ(a.op.state, State::kDone);
  arrive(q, 7, 1);
  EXPECT_EQ(b.first(), 1);
  arrive(q, 7, 2);  // parked: nobody is posted
  Op c(7), d(7);
  q.post(c.op);
  q.post(d.op);
  q.cancel(c.op);
  q.serveClaims(7);
  EXPECT_EQ(d.first(), 2);
}

TEST(TagQueuesTest, FailAllFailsClaimsAndPostedButNotTheOpBeingFilled) {
  TagQueues q;
  Op filling(1), posted(2), claim(3);
  q.post(filling.op);
  TagQueues::Destination d = q.beginFrame(1, 4);
  EXPECT_EQ(filling.op.state, State::kFilling);
  q.post(posted.op);
  TagQueues::Destination half = q.beginFrame(3, 4);  // keeps the claim waiting
  (void)half;
  q.post(claim.op);
  q.serveClaims(3);
  EXPECT_EQ(claim.op.state, State::kClaiming);
  q.failAll(ErrorCode::kPeerLost, "node 1: gone");
  for (RecvOp* op : {&posted.op, &claim.op}) {
    EXPECT_EQ(op->state, State::kDone);
    EXPECT_TRUE(op->failed);
    EXPECT_EQ(op->error_code, ErrorCode::kPeerLost);
    EXPECT_EQ(op->error, "node 1: gone");
  }
  EXPECT_EQ(filling.op.state, State::kFilling);
  q.finishFrame(d, 4);
  EXPECT_FALSE(filling.op.failed);
}

// The peer closed in order: claims first take the complete frames parked for them (the
// second claim of tag 5 finds none left and fails, as does one whose message does not fit);
// without serve_parked the same claim fails.
TEST(TagQueuesTest, FailAllAfterAGoodbyeServesClaimsFromParkedFramesFirst) {
  TagQueues q;
  arrive(q, 5, 0x55);
  arrive(q, 6, 0x66, 8);
  Op first(5), second(5), small(6, 4);
  for (Op* o : {&first, &second, &small}) q.post(o->op);
  q.failAll(ErrorCode::kPeerLost, "node 1: it shut down", /*serve_parked=*/true);
  EXPECT_EQ(first.op.state, State::kDone);
  EXPECT_FALSE(first.op.failed);
  EXPECT_EQ(first.op.size, 4u);
  EXPECT_EQ(first.first(), 0x55);
  EXPECT_TRUE(second.op.failed);
  EXPECT_EQ(second.op.error_code, ErrorCode::kPeerLost);
  EXPECT_TRUE(small.op.failed);
  EXPECT_EQ(small.op.error_code, ErrorCode::kInvalidData);

  TagQueues lost;
  arrive(lost, 5, 0x55);
  Op claim(5);
  lost.post(claim.op);
  lost.failAll(ErrorCode::kPeerLost, "node 1: gone");
  EXPECT_TRUE(claim.op.failed);
}

TEST(TagQueuesTest, ParkedBuffersAreReused) {
  TagQueues q;
  for (int round = 0; round < 3; ++round) {
    arrive(q, 7, static_cast<uint8_t>(round), 1024);
    Op a(7, 1024);
    q.post(a.op);
    q.serveClaims(7);
    EXPECT_EQ(a.first(), round);
  }
  TagQueues::Destination d1 = q.beginFrame(7, 512);
  TagQueues::Destination d2 = q.beginFrame(7, 512);
  EXPECT_NE(d1.data, d2.data);
}

// ---- Through Links -------------------------------------------------------------------------

struct LinkPair {
  LinkPair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    LinkOptions o;
    o.peer_name = "node 1 at test";
    o.max_frame_bytes = 1 << 20;
    a = std::make_unique<Link>(makePlainTransport(Fd(fds[0])), o, nullptr);
    o.peer_name = "node 0 at test";
    b = std::make_unique<Link>(makePlainTransport(Fd(fds[1])), o, nullptr);
  }
  void send(uint32_t tag, uint8_t value) {
    std::vector<std::byte> data(32, std::byte{value});
    a->send(tag, data);
  }
  std::unique_ptr<Link> a, b;
};

TEST(TagQueuesLinkTest, ConcurrentWaitersOnOneTagGetMessagesInPostOrder) {
  LinkPair p;
  constexpr int kOps = 8;
  std::vector<std::vector<std::byte>> out(kOps, std::vector<std::byte>(32));
  std::vector<RecvOp> ops(kOps);
  for (int i = 0; i < kOps; ++i) p.b->post(ops[i], 5, out[i]);
  std::vector<std::thread> waiters;
  for (int i = kOps - 1; i >= 0; --i) waiters.emplace_back([&, i] { p.b->wait(ops[i]); });
  for (int i = 0; i < kOps; ++i) p.send(5, static_cast<uint8_t>(i));
  for (auto& t : waiters) t.join();
  for (int i = 0; i < kOps; ++i) EXPECT_EQ(static_cast<int>(out[i][0]), i);
}

TEST(TagQueuesLinkTest, FramesSentBeforeTheReceivesArriveInOrderOnEachTag) {
  LinkPair p;
  for (int i = 0; i < 6; ++i) p.send(static_cast<uint32_t>(i % 2), static_cast<uint8_t>(i));
  std::vector<std::byte> out(32);
  for (int i = 1; i < 6; i += 2) {
    p.b->recv(1, out);
    EXPECT_EQ(static_cast<int>(out[0]), i);
  }
  for (int i = 0; i < 6; i += 2) {
    p.b->recv(0, out);
    EXPECT_EQ(static_cast<int>(out[0]), i);
  }
}

TEST(TagQueuesLinkTest, FailureWakesEveryWaiter) {
  LinkPair p;
  std::vector<std::future<ErrorCode>> waiters;
  for (uint32_t tag = 0; tag < 4; ++tag) {
    waiters.push_back(std::async(std::launch::async, [&, tag] {
      std::vector<std::byte> out(32);
      try {
        p.b->recv(tag, out);
      } catch (const Error& e) {
        return e.code();
      }
      return ErrorCode::kInternal;
    }));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  p.b->fail(ErrorCode::kAborted, "test abort");
  for (auto& w : waiters) EXPECT_EQ(w.get(), ErrorCode::kAborted);
}

TEST(TagQueuesLinkTest, ThePeerClosingWakesEveryWaiter) {
  LinkPair p;
  p.b->setQuiet();
  std::vector<std::future<ErrorCode>> waiters;
  for (int i = 0; i < 3; ++i) {
    waiters.push_back(std::async(std::launch::async, [&] {
      std::vector<std::byte> out(32);
      try {
        p.b->recv(3, out);
      } catch (const Error& e) {
        return e.code();
      }
      return ErrorCode::kInternal;
    }));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  p.a.reset();
  for (auto& w : waiters) EXPECT_EQ(w.get(), ErrorCode::kPeerLost);
}

}  // namespace
}  // namespace tpnode::mesh
