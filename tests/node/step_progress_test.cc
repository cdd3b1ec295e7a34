// The step progress messages (node/step_progress.h): round trips, hostile bytes refused with
// the code the wire protocol documents, and a worker's ProgressResponder over the fake mesh
// (it answers with its counts; a malformed query, or one for another node, drops node 0); the
// KV tier counter reports: a worker's responder answers node 0's TierCounterPoll with its
// tally, and reports that are malformed or name ranks of another node are dropped.
#include "node/step_progress.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "common/byte_order.h"
#include "common/error.h"
#include "node/mesh_setup.h"
#include "node/progress_responder.h"
#include "node/stall_probe.h"
#include "node/tier_counter_poll.h"
#include "tests/collectives/fake_mesh.h"

namespace tpnode::node {
namespace {

ErrorCode codeOf(auto&& decode) {
  try {
    decode();
  } catch (const Error& e) {
    return e.code();
  }
  ADD_FAILURE() << "decoded without an error";
  return ErrorCode::kInternal;
}

TEST(StepProgressTest, QueryAndReportRoundTrip) {
  const auto q = encodeProgressQuery({ProgressKind::kProbe, 7, 2});
  ProgressQuery back = decodeProgressQuery(q);
  EXPECT_EQ(back.kind, ProgressKind::kProbe);
  EXPECT_EQ(back.probe, 7u);
  EXPECT_EQ(back.node, 2u);
  EXPECT_EQ(loadLE32(reinterpret_cast<const uint8_t*>(q.data())), 0x51505054u);  // "TPPQ"

  const auto r = encodeProgressReport({7, 3, 1'000'000'000'000ULL, 999'999'999'999ULL});
  ProgressReport rb = decodeProgressReport(r);
  EXPECT_EQ(rb.probe, 7u);
  EXPECT_EQ(rb.node, 3u);
  EXPECT_EQ(rb.received, 1'000'000'000'000ULL);
  EXPECT_EQ(rb.begun, 999'999'999'999ULL);
}

TEST(StepProgressTest, HostileBytesAreRefused) {
  auto q = encodeProgressQuery({ProgressKind::kProbe, 1, 0});
  auto* qp = reinterpret_cast<uint8_t*>(q.data());
  for (size_t n = 0; n < q.size(); ++n) {  // truncated
    EXPECT_EQ(codeOf([&] { decodeProgressQuery(std::span(q.data(), n)); }), ErrorCode::kInvalidData)
        << n;
  }
  std::vector<std::byte> longer(q.begin(), q.end());
  longer.push_back(std::byte{0});
  EXPECT_EQ(codeOf([&] { decodeProgressQuery(longer); }), ErrorCode::kInvalidData);
  auto bad = q;
  storeLE32(reinterpret_cast<uint8_t*>(bad.data()), 0x43535054);  // a step command's magic
  EXPECT_EQ(codeOf([&] { decodeProgressQuery(bad); }), ErrorCode::kInvalidData);
  bad = q;
  storeLE16(reinterpret_cast<uint8_t*>(bad.data()) + 4, 1);  // another version
  EXPECT_EQ(codeOf([&] { decodeProgressQuery(bad); }), ErrorCode::kMismatch);
  for (uint16_t kind : {0, 3, 0xffff}) {
    storeLE16(qp + 6, kind);
    EXPECT_EQ(codeOf([&] { decodeProgressQuery(q); }), ErrorCode::kInvalidData) << kind;
  }

  auto r = encodeProgressReport({1, 1, 5, 5});
  auto* rp = reinterpret_cast<uint8_t*>(r.data());
  EXPECT_EQ(codeOf([&] { decodeProgressReport(std::span(r.data(), 31)); }),
            ErrorCode::kInvalidData);
  EXPECT_EQ(codeOf([&] { decodeProgressReport(q); }), ErrorCode::kInvalidData);  // a query
  storeLE16(rp + 6, 1);                                                          // reserved
  EXPECT_EQ(codeOf([&] { decodeProgressReport(r); }), ErrorCode::kInvalidData);
  storeLE16(rp + 6, 0);
  storeLE64(rp + 24, 6);  // begun 6 > received 5
  EXPECT_EQ(codeOf([&] { decodeProgressReport(r); }), ErrorCode::kInvalidData);
}

TEST(ProgressResponderTest, AnswersWithItsCountsAndDropsNodeZeroOnAMalformedQuery) {
  auto net = collectives::testing::FakeNetwork::create(3);
  auto node0 = net->mesh(0);
  auto node2 = net->mesh(2);
  ProgressResponder responder(*node2);
  responder.noteReceived();
  responder.noteBegun();
  responder.noteReceived();
  node0->send(2, kTagProgress, encodeProgressQuery({ProgressKind::kProbe, 5, 2}));
  std::array<std::byte, kProgressReportBytes> buf{};
  const size_t n = node0->recv(2, kTagProgressReport, buf);
  ProgressReport r = decodeProgressReport(std::span(buf.data(), n));
  EXPECT_EQ(r.probe, 5u);
  EXPECT_EQ(r.node, 2u);
  EXPECT_EQ(r.received, 2u);
  EXPECT_EQ(r.begun, 1u);

  // A query for node 1 reaching node 2: the responder drops node 0 (the fake kills it).
  node0->send(2, kTagProgress, encodeProgressQuery({ProgressKind::kProbe, 6, 1}));
  for (int i = 0; i < 200 && node2->peerAlive(0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(node2->peerAlive(0));
}

TEST(StepProgressTest, TierReportRoundTripAndHostileBytes) {
  TierReport t{9, 1, {}};
  t.ranks.push_back({2, {5'000'000'000ULL, 7, 0, 0}});
  t.ranks.push_back({3, {11, 0, 0, 0}});
  std::vector<std::byte> b = encodeTierReport(t);
  ASSERT_EQ(b.size(), kTierReportHeaderBytes + 2 * kTierReportRankBytes);
  EXPECT_EQ(loadLE32(reinterpret_cast<const uint8_t*>(b.data())), 0x43545054u);  // "TPTC"
  TierReport back = decodeTierReport(b);
  EXPECT_EQ(back.probe, 9u);
  EXPECT_EQ(back.node, 1u);
  ASSERT_EQ(back.ranks.size(), 2u);
  EXPECT_EQ(back.ranks[0].rank, 2u);
  EXPECT_EQ(back.ranks[0].counters.stored, 5'000'000'000ULL);
  EXPECT_EQ(back.ranks[0].counters.store_dropped, 7u);
  EXPECT_EQ(back.ranks[1].rank, 3u);
  EXPECT_EQ(back.ranks[1].counters.stored, 11u);
  EXPECT_TRUE(decodeTierReport(encodeTierReport({1, 2, {}})).ranks.empty());

  for (size_t n = 0; n < b.size(); ++n) {  // truncated
    EXPECT_EQ(codeOf([&] { decodeTierReport(std::span(b.data(), n)); }), ErrorCode::kInvalidData)
        << n;
  }
  auto refused = [&](auto&& damage, ErrorCode code) {
    std::vector<std::byte> bad = b;
    damage(reinterpret_cast<uint8_t*>(bad.data()), bad);
    EXPECT_EQ(codeOf([&] { decodeTierReport(bad); }), code);
  };
  refused([](uint8_t*, std::vector<std::byte>& v) { v.push_back(std::byte{0}); },
          ErrorCode::kInvalidData);                                       // trailing byte
  refused([](uint8_t* q, auto&) { storeLE32(q, kProgressReportMagic); },  // another message
          ErrorCode::kInvalidData);
  refused([](uint8_t* q, auto&) { storeLE16(q + 4, 1); }, ErrorCode::kMismatch);     // version
  refused([](uint8_t* q, auto&) { storeLE16(q + 6, 3); }, ErrorCode::kInvalidData);  // count
  refused([](uint8_t* q, auto&) { storeLE16(q + 6, 0xffff); }, ErrorCode::kInvalidData);
  refused([](uint8_t* q, auto&) { storeLE32(q + 16 + 4, 1); }, ErrorCode::kInvalidData);
  refused([](uint8_t* q, auto&) { storeLE32(q + 16 + 24, 2); },  // rank twice
          ErrorCode::kInvalidData);
  refused([](uint8_t* q, auto&) { storeLE32(q + 16 + 24, 1); },  // ranks descend
          ErrorCode::kInvalidData);
  EXPECT_EQ(codeOf([&] {
              decodeTierReport(encodeProgressQuery({ProgressKind::kProbe, 1, 1}));
            }),
            ErrorCode::kInvalidData);
  TierReport huge;
  huge.ranks.resize(kMaxTierReportRanks + 1);
  EXPECT_EQ(codeOf([&] { encodeTierReport(huge); }), ErrorCode::kInvalidArgument);
}

// Node 0's poll gets each worker's tally through its responder, and drops a report that names
// ranks of another node.
TEST(TierCounterPollTest, CollectsEveryWorkersTallyAndDropsForeignRanks) {
  auto net = collectives::testing::FakeNetwork::create(3);
  auto node0 = net->mesh(0);
  auto node1 = net->mesh(1);
  auto node2 = net->mesh(2);
  // Two ranks per node: node n holds global ranks 2n and 2n + 1.
  auto tally1 = std::make_shared<KvTierTally>();
  tally1->cell(2).stored = 5;
  tally1->cell(3).stored = 6;
  tally1->cell(3).store_dropped = 1;
  ProgressResponder responder1(*node1);
  responder1.setTierTally(tally1);
  ProgressResponder responder2(*node2);  // no tally yet: no ranks
  TierCounterPoll poll(
      *node0, [](int node) { return std::pair(uint32_t(2 * node), uint32_t{2}); },
      std::chrono::milliseconds(20));
  std::map<uint32_t, TierReport> latest;
  auto pollUntil = [&](auto&& done) {
    for (int i = 0; i < 2000 && !done(); ++i) {
      for (TierReport& r : poll.poll()) latest[r.node] = std::move(r);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  };
  pollUntil([&] { return latest.count(1) == 1 && latest.count(2) == 1; });
  ASSERT_EQ(latest.count(1), 1u);
  ASSERT_EQ(latest[1].ranks.size(), 2u);
  EXPECT_EQ(latest[1].ranks[0].rank, 2u);
  EXPECT_EQ(latest[1].ranks[0].counters.stored, 5u);
  EXPECT_EQ(latest[1].ranks[1].counters.stored, 6u);
  EXPECT_EQ(latest[1].ranks[1].counters.store_dropped, 1u);
  ASSERT_EQ(latest.count(2), 1u);
  EXPECT_TRUE(latest[2].ranks.empty());

  // Node 2 now reports node 1's ranks: dropped, its last good report stays.
  auto foreign = std::make_shared<KvTierTally>();
  foreign->cell(2).stored = 99;
  responder2.setTierTally(foreign);
  tally1->cell(2).stored = 8;
  pollUntil([&] { return latest[1].ranks[0].counters.stored == 8; });  // answers go on
  EXPECT_EQ(latest[1].ranks[0].counters.stored, 8u);
  for (int i = 0; i < 10; ++i) {
    for (TierReport& r : poll.poll()) latest[r.node] = std::move(r);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(latest[2].ranks.empty());
}

// What node 0 waits on each worker to have taken up: every command sent, or, with pipeline steps
// in flight, the count when the awaited step went out (never more than was sent).
TEST(CommandLedgerTest, AwaitsAllOrUpToASnapshot) {
  CommandLedger ledger(3);
  ledger.noteSent(1);
  ledger.noteSent(2);
  EXPECT_EQ(ledger.awaited(1), 1u);
  const std::vector<uint64_t> first = ledger.snapshot();
  EXPECT_EQ(first, (std::vector<uint64_t>{0, 1, 1}));
  ledger.noteSent(1);
  ledger.noteSent(2);
  EXPECT_EQ(ledger.awaited(2), 2u);  // awaitAll() by default
  std::vector<uint64_t> upto = first;
  upto[1] = CommandLedger::kAll;
  ledger.awaitUpTo(upto);
  EXPECT_EQ(ledger.awaited(1), 2u);
  EXPECT_EQ(ledger.awaited(2), 1u);
  ledger.awaitUpTo(std::vector<uint64_t>{0, 9, 9});
  EXPECT_EQ(ledger.awaited(1), 2u);  // at most what was sent
  ledger.awaitAll();
  EXPECT_EQ(ledger.awaited(2), 2u);
}

}  // namespace
}  // namespace tpnode::node
