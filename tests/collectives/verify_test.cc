// collectives/verify.h: the shared verify-by-reduction helper must pass a correct all-reduce
// and catch a wrong one (a deliberately broken reduction, a communicator that drops a rank).
#include "collectives/verify.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "collectives/local_group.h"
#include "tests/collectives/test_util.h"

namespace tpnode::collectives {
namespace {

using testing::runRanks;

// The reduction of `ranks` ranks done serially on one host span: what every correct
// all-reduce leaves on every rank.
HostReduceFn serialSum(int rank, int ranks) {
  return [rank, ranks](std::span<float> data) {
    for (size_t i = 0; i < data.size(); ++i) {
      float acc = 0.0f;
      for (int q = 0; q < ranks; ++q) acc += q == rank ? data[i] : verifyValue(q, i);
      data[i] = acc;
    }
  };
}

TEST(VerifyTest, PatternSumsAreExactIntegers) {
  for (size_t i = 0; i < 200; ++i) {
    const float v = verifyValue(3, i);
    EXPECT_EQ(v, std::round(v));
    EXPECT_LE(std::fabs(v), 30.0f);
  }
  EXPECT_EQ(verifyExpected(1, 5), verifyValue(0, 5));
  EXPECT_EQ(verifyExpected(2, 5), verifyValue(0, 5) + verifyValue(1, 5));
}

TEST(VerifyTest, CorrectReductionPasses) {
  for (int ranks : {1, 2, 5}) {
    for (int rank = 0; rank < ranks; ++rank) {
      const VerifyResult r = verifyByReduction(rank, ranks, 1000, serialSum(rank, ranks));
      EXPECT_TRUE(r.ok) << r.describe();
      EXPECT_EQ(r.count, 1000u);
      EXPECT_EQ(r.describe(), "correct");
    }
  }
}

TEST(VerifyTest, NoReductionFails) {
  const VerifyResult r = verifyByReduction(0, 2, 100, [](std::span<float>) {});
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.index, 0u);
  EXPECT_EQ(r.got, verifyValue(0, 0));
  EXPECT_EQ(r.want, verifyExpected(2, 0));
}

TEST(VerifyTest, OneWrongElementIsFoundAndNamed) {
  const HostReduceFn good = serialSum(1, 3);
  const VerifyResult r = verifyByReduction(1, 3, 4099, [&](std::span<float> data) {
    good(data);
    data[4097] += 1.0f;  // broken: the last-but-one element is off by one
  });
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.index, 4097u);
  EXPECT_EQ(r.count, 4099u);
  EXPECT_EQ(r.got, r.want + 1.0f);
  EXPECT_EQ(r.describe(), fmt::format("element 4097 of 4099 is {}, want {}", r.got, r.want));
}

TEST(VerifyTest, ToleranceAcceptsSmallErrorsButNeverNaN) {
  std::vector<float> data(10);
  for (size_t i = 0; i < data.size(); ++i) data[i] = verifyExpected(4, i) + 0.25f;
  EXPECT_FALSE(checkVerifyPattern(4, data).ok);
  EXPECT_TRUE(checkVerifyPattern(4, data, 0.5f).ok);
  data[3] = std::numeric_limits<float>::quiet_NaN();
  const VerifyResult r = checkVerifyPattern(4, data, 0.5f);
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.index, 3u);
}

TEST(VerifyTest, RealLocalAllReducePasses) {
  constexpr int kRanks = 4;
  auto group = LocalGroup::create(kRanks);
  std::vector<VerifyResult> results(kRanks);
  runRanks(kRanks, [&](int r) {
    auto comm = group->communicator(r);
    results[static_cast<size_t>(r)] = verifyAllReduce(*comm, 65537);
  });
  for (const auto& r : results) EXPECT_TRUE(r.ok) << r.describe();
}

// A communicator whose all-reduce leaves out the last rank's contribution.
class DropLastRank final : public Communicator {
 public:
  explicit DropLastRank(std::unique_ptr<Communicator> inner) : inner_(std::move(inner)) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  void allReduceSum(void* data, size_t count, DType dtype) override {
    if (rank() == size() - 1) std::fill_n(static_cast<float*>(data), count, 0.0f);
    inner_->allReduceSum(data, count, dtype);
  }
  void allGather(const void* in, void* out, size_t count, DType dtype) override {
    inner_->allGather(in, out, count, dtype);
  }
  void broadcast(void* data, size_t count, DType dtype, int root) override {
    inner_->broadcast(data, count, dtype, root);
  }
  void barrier() override { inner_->barrier(); }

 private:
  std::unique_ptr<Communicator> inner_;
};

TEST(VerifyTest, BrokenAllReduceFailsOnEveryRank) {
  constexpr int kRanks = 3;
  auto group = LocalGroup::create(kRanks);
  std::vector<VerifyResult> results(kRanks);
  runRanks(kRanks, [&](int r) {
    DropLastRank comm(group->communicator(r));
    results[static_cast<size_t>(r)] = verifyAllReduce(comm, 1000);
  });
  for (const auto& r : results) {
    ASSERT_FALSE(r.ok);
    EXPECT_EQ(r.want - r.got, verifyValue(kRanks - 1, r.index));
  }
}

}  // namespace
}  // namespace tpnode::collectives
