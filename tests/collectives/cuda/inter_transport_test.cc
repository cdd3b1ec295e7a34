// The pure part of NCCL across nodes (collectives/cuda/inter_transport.h): names, the record
// every rank shares over the host communicator (hostile values refused), and the decision every
// rank takes from the gathered records. Built and run with or without CUDA (label unit).
#include "collectives/cuda/inter_transport.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/error.h"

namespace tpnode::collectives::cuda {
namespace {

using IT = InterTransport;
using IF = InterFailure;

InterRecord rec(IT requested, IF failure = IF::kNone, double nccl_us = 0, double mesh_us = 0) {
  InterRecord r;
  r.requested = requested;
  r.failure = failure;
  r.nccl_us = nccl_us;
  r.mesh_us = mesh_us;
  return r;
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(InterTransportTest, NamesRoundTripAndUnknownIsRefusedNamingTheFlag) {
  for (IT t : {IT::kAuto, IT::kMesh, IT::kNccl}) {
    EXPECT_EQ(parseInterTransport(interTransportName(t), "--inter-transport"), t);
  }
  EXPECT_EQ(interTransportName(IT::kMesh), "mesh");
  for (const char* bad : {"", "tcp", "NCCL", "nccl ", "ib", "host"}) {
    try {
      parseInterTransport(bad, "--inter-transport");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_TRUE(has(e.what(), "--inter-transport")) << e.what();
      EXPECT_TRUE(has(e.what(), std::string("'") + bad + "'")) << e.what();
    }
  }
}

TEST(InterTransportTest, RecordsRoundTrip) {
  for (IT t : {IT::kAuto, IT::kMesh, IT::kNccl}) {
    for (IF f : {IF::kNone, IF::kNotBuilt, IF::kSharedGpu, IF::kUniqueId, IF::kInit, IF::kVerify,
                 IF::kBadRecord}) {
      const InterRecord r = rec(t, f, 12.5, 80.25);
      const auto enc = encodeRecord(r);
      const InterRecord back = decodeRecord(enc);
      EXPECT_EQ(back.requested, t);
      EXPECT_EQ(back.failure, f);
      EXPECT_EQ(back.nccl_us, 12.5);
      EXPECT_EQ(back.mesh_us, 80.25);
    }
  }
}

TEST(InterTransportTest, HostileRecordsBecomeFailures) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<std::array<float, kRecordFloats>> bad = {
      {3, 0, 0, 0},   {-1, 0, 0, 0},  {0.5f, 0, 0, 0}, {0, 7, 0, 0},
      {0, -1, 0, 0},  {nan, 0, 0, 0}, {0, nan, 0, 0},  {0, 0, nan, 0},
      {0, 0, 0, inf}, {0, 0, -1, 0},  {1e9f, 0, 0, 0}};
  for (const auto& b : bad) {
    EXPECT_EQ(decodeRecord(b).failure, IF::kBadRecord) << b[0] << " " << b[1] << " " << b[2];
  }
  const std::vector<float> short_record = {0, 0, 0};
  EXPECT_EQ(decodeRecord(short_record).failure, IF::kBadRecord);
  // decodeRecords: one record per kRecordFloats values, in rank order.
  std::vector<float> all;
  for (const auto& r : {rec(IT::kAuto), rec(IT::kMesh, IF::kNone, 1, 2)}) {
    const auto e = encodeRecord(r);
    all.insert(all.end(), e.begin(), e.end());
  }
  const auto records = decodeRecords(all);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[1].requested, IT::kMesh);
  EXPECT_EQ(records[1].mesh_us, 2.0);
}

TEST(InterTransportTest, BlockerNamesTheReasonAndTheRanks) {
  std::vector<InterRecord> ok = {rec(IT::kAuto), rec(IT::kAuto), rec(IT::kAuto), rec(IT::kAuto)};
  EXPECT_EQ(interBlocker(ok), "");
  auto r = ok;
  r[2].requested = IT::kMesh;
  r[3].requested = IT::kMesh;
  EXPECT_EQ(interBlocker(r), "--inter-transport mesh on rank(s) 2,3");
  r = ok;
  r[1].failure = IF::kNotBuilt;
  EXPECT_EQ(interBlocker(r), "built without NCCL on rank(s) 1");
  r = ok;
  r[0].failure = IF::kInit;
  r[1].failure = IF::kInit;
  EXPECT_TRUE(has(interBlocker(r), "ncclCommInitRank failed or timed out on rank(s) 0,1"))
      << interBlocker(r);
  r = ok;
  r[3].failure = IF::kVerify;
  r[1].failure = IF::kSharedGpu;
  EXPECT_TRUE(has(interBlocker(r), "share a GPU")) << "the earliest step names the reason";
  r = ok;
  r[0].failure = IF::kBadRecord;
  EXPECT_TRUE(has(interBlocker(r), "malformed")) << interBlocker(r);
  EXPECT_FALSE(interBlocker({}).empty());
}

TEST(InterTransportTest, TimedOnlyWhenEveryRankAskedForAuto) {
  EXPECT_TRUE(interTimed(std::vector<InterRecord>{rec(IT::kAuto), rec(IT::kAuto)}));
  EXPECT_FALSE(interTimed(std::vector<InterRecord>{rec(IT::kAuto), rec(IT::kNccl)}));
  EXPECT_FALSE(interTimed(std::vector<InterRecord>{rec(IT::kNccl), rec(IT::kNccl)}));
  EXPECT_FALSE(interTimed(std::vector<InterRecord>{}));
}

TEST(InterTransportTest, DecisionTakesTheFasterPathBySlowestRank) {
  // nccl is faster on every rank's median; the slowest rank counts per path.
  std::vector<InterRecord> r = {rec(IT::kAuto, IF::kNone, 10, 90),
                                rec(IT::kAuto, IF::kNone, 30, 40)};
  InterDecision d = decideInter(r, 16 << 10);
  EXPECT_EQ(d.chosen, IT::kNccl);
  EXPECT_EQ(d.reason, "measured nccl 30.0 us, mesh 90.0 us (16 KiB)");
  // The mesh is faster once nccl's slowest rank is slower than the mesh's slowest.
  r[1].nccl_us = 95;
  d = decideInter(r, 16 << 10);
  EXPECT_EQ(d.chosen, IT::kMesh);
  EXPECT_TRUE(has(d.reason, "measured nccl 95.0 us, mesh 90.0 us")) << d.reason;
  // A tie keeps the mesh (the path that needs no extra communicator).
  r[1].nccl_us = 90;
  EXPECT_EQ(decideInter(r, 16 << 10).chosen, IT::kMesh);
  // A missing timing never picks nccl.
  r[0].nccl_us = 0;
  r[1].nccl_us = 0;
  d = decideInter(r, 16 << 10);
  EXPECT_EQ(d.chosen, IT::kMesh);
  EXPECT_TRUE(has(d.reason, "missing")) << d.reason;
}

TEST(InterTransportTest, DecisionForcedAndFallbacks) {
  // Forced nccl with nothing blocking: nccl, untimed.
  InterDecision d = decideInter(std::vector<InterRecord>{rec(IT::kNccl), rec(IT::kNccl)}, 4096);
  EXPECT_EQ(d.chosen, IT::kNccl);
  EXPECT_TRUE(has(d.reason, "forced")) << d.reason;
  // Forced nccl but one rank failed its init: mesh, with the reason (the caller refuses).
  d = decideInter(std::vector<InterRecord>{rec(IT::kNccl), rec(IT::kNccl, IF::kInit)}, 4096);
  EXPECT_EQ(d.chosen, IT::kMesh);
  EXPECT_TRUE(has(d.reason, "rank(s) 1")) << d.reason;
  // Duplicate GPUs across processes show as an init failure on every rank: mesh.
  d = decideInter(std::vector<InterRecord>{rec(IT::kAuto, IF::kInit), rec(IT::kAuto, IF::kInit)},
                  4096);
  EXPECT_EQ(d.chosen, IT::kMesh);
  EXPECT_TRUE(has(d.reason, "0,1")) << d.reason;
  // Any rank asking for mesh: mesh everywhere.
  d = decideInter(std::vector<InterRecord>{rec(IT::kMesh), rec(IT::kAuto, IF::kNone, 1, 100)},
                  4096);
  EXPECT_EQ(d.chosen, IT::kMesh);
  EXPECT_TRUE(has(d.reason, "--inter-transport mesh")) << d.reason;
  // Built without NCCL: mesh with that reason.
  d = decideInter(std::vector<InterRecord>{rec(IT::kAuto, IF::kNotBuilt), rec(IT::kAuto)}, 4096);
  EXPECT_EQ(d.chosen, IT::kMesh);
  EXPECT_TRUE(has(d.reason, "built without NCCL")) << d.reason;
}

}  // namespace
}  // namespace tpnode::collectives::cuda
