#include "collectives/local_group.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

#include "tests/collectives/test_util.h"

namespace tpnode::collectives {
namespace {

using testing::Bytes;
using testing::runRanks;

CollectiveOptions fastOptions() {
  CollectiveOptions o;
  o.spin = std::chrono::microseconds(20);
  return o;
}

std::vector<Bytes> makeInputs(int ranks, size_t count, DType dtype, bool integers = false) {
  std::vector<Bytes> in;
  for (int r = 0; r < ranks; ++r) {
    in.push_back(testing::makeData(
        count, dtype, 1000u + static_cast<uint32_t>(r) * 7919u + static_cast<uint32_t>(count),
        integers));
  }
  return in;
}

struct Case {
  int ranks;
  size_t count;
  DType dtype;
};

class LocalAllReduceTest : public ::testing::TestWithParam<Case> {};

TEST_P(LocalAllReduceTest, MatchesSerialReferenceBitForBit) {
  const auto [ranks, count, dtype] = GetParam();
  const std::vector<Bytes> inputs = makeInputs(ranks, count, dtype);
  const Bytes expected =
      testing::referenceAllReduce({inputs}, count, dtype, testing::RefAlgo::kDirect);
  auto group = LocalGroup::create(ranks, fastOptions());
  std::vector<Bytes> results = inputs;
  runRanks(ranks, [&](int r) {
    auto comm = group->communicator(r);
    EXPECT_EQ(comm->rank(), r);
    EXPECT_EQ(comm->size(), ranks);
    // Twice on the same buffers: the group is reusable and the result is reproducible.
    Bytes again = inputs[static_cast<size_t>(r)];
    comm->allReduceSum(results[static_cast<size_t>(r)].data(), count, dtype);
    comm->allReduceSum(again.data(), count, dtype);
    EXPECT_EQ(again, results[static_cast<size_t>(r)]);
  });
  for (int r = 0; r < ranks; ++r) {
    ASSERT_EQ(results[static_cast<size_t>(r)], expected) << "rank " << r;
  }
}

std::vector<Case> allReduceCases() {
  std::vector<Case> cases;
  for (int ranks : {1, 2, 3, 4}) {
    for (size_t count : {size_t{1}, size_t{7}, size_t{16}, size_t{33}, size_t{1000}, size_t{4097},
                         size_t{65537}}) {
      for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
        cases.push_back({ranks, count, dtype});
      }
    }
  }
  cases.push_back({4, (size_t{64} << 20) / 4, DType::kF32});  // 64 MiB
  cases.push_back({3, (size_t{16} << 20) / 2 + 3, DType::kBF16});
  return cases;
}

std::string caseName(const ::testing::TestParamInfo<Case>& info) {
  return fmt::format("r{}_n{}_{}", info.param.ranks, info.param.count, dtypeName(info.param.dtype));
}

INSTANTIATE_TEST_SUITE_P(Sizes, LocalAllReduceTest, ::testing::ValuesIn(allReduceCases()),
                         caseName);

TEST(LocalGroupTest, IntegerSumsAreExact) {
  const int ranks = 4;
  const size_t count = 1031;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    const std::vector<Bytes> inputs = makeInputs(ranks, count, dtype, /*integers=*/true);
    auto group = LocalGroup::create(ranks, fastOptions());
    std::vector<Bytes> results = inputs;
    runRanks(ranks, [&](int r) {
      group->communicator(r)->allReduceSum(results[static_cast<size_t>(r)].data(), count, dtype);
    });
    for (size_t i = 0; i < count; ++i) {
      float sum = 0;
      for (const Bytes& in : inputs) sum += testing::loadElem(in, i, dtype);
      for (int r = 0; r < ranks; ++r) {
        ASSERT_EQ(testing::loadElem(results[static_cast<size_t>(r)], i, dtype), sum);
      }
    }
  }
}

TEST(LocalGroupTest, AllGatherConcatenatesInRankOrder) {
  for (int ranks : {1, 2, 3, 4}) {
    for (size_t count : {size_t{1}, size_t{5}, size_t{1027}}) {
      const DType dtype = DType::kBF16;
      const std::vector<Bytes> inputs = makeInputs(ranks, count, dtype);
      Bytes expected;
      for (const Bytes& in : inputs) expected.insert(expected.end(), in.begin(), in.end());
      auto group = LocalGroup::create(ranks, fastOptions());
      std::vector<Bytes> out(static_cast<size_t>(ranks), Bytes(expected.size()));
      runRanks(ranks, [&](int r) {
        group->communicator(r)->allGather(inputs[static_cast<size_t>(r)].data(),
                                          out[static_cast<size_t>(r)].data(), count, dtype);
      });
      for (int r = 0; r < ranks; ++r) EXPECT_EQ(out[static_cast<size_t>(r)], expected);
    }
  }
}

TEST(LocalGroupTest, AllGatherInPlace) {
  const int ranks = 3;
  const size_t count = 9;
  const std::vector<Bytes> inputs = makeInputs(ranks, count, DType::kF32);
  Bytes expected;
  for (const Bytes& in : inputs) expected.insert(expected.end(), in.begin(), in.end());
  auto group = LocalGroup::create(ranks, fastOptions());
  std::vector<Bytes> out(static_cast<size_t>(ranks), Bytes(expected.size()));
  runRanks(ranks, [&](int r) {
    std::byte* mine = out[static_cast<size_t>(r)].data() + static_cast<size_t>(r) * count * 4;
    std::memcpy(mine, inputs[static_cast<size_t>(r)].data(), count * 4);
    group->communicator(r)->allGather(mine, out[static_cast<size_t>(r)].data(), count, DType::kF32);
  });
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(out[static_cast<size_t>(r)], expected);
}

TEST(LocalGroupTest, BroadcastFromEveryRoot) {
  const int ranks = 4;
  const size_t count = 333;
  auto group = LocalGroup::create(ranks, fastOptions());
  const std::vector<Bytes> inputs = makeInputs(ranks, count, DType::kF16);
  std::vector<Bytes> out = inputs;
  runRanks(ranks, [&](int r) {
    auto comm = group->communicator(r);
    for (int root = 0; root < ranks; ++root) {
      Bytes buf = inputs[static_cast<size_t>(r)];
      comm->broadcast(buf.data(), count, DType::kF16, root);
      EXPECT_EQ(buf, inputs[static_cast<size_t>(root)]) << "root " << root << " rank " << r;
    }
  });
}

TEST(LocalGroupTest, BarrierOrdersWrites) {
  const int ranks = 4;
  auto group = LocalGroup::create(ranks, fastOptions());
  std::vector<int> marks(ranks, 0);  // written before the barrier, read after it
  runRanks(ranks, [&](int r) {
    auto comm = group->communicator(r);
    for (int round = 1; round <= 200; ++round) {
      marks[static_cast<size_t>(r)] = round;
      comm->barrier();
      for (int k = 0; k < ranks; ++k) EXPECT_EQ(marks[static_cast<size_t>(k)], round);
      comm->barrier();
    }
  });
}

TEST(LocalGroupTest, MismatchedCountsFailOnEveryRank) {
  const int ranks = 3;
  auto group = LocalGroup::create(ranks, fastOptions());
  std::atomic<int> failures{0};
  runRanks(ranks, [&](int r) {
    std::vector<float> buf(10);
    try {
      group->communicator(r)->allReduceSum(buf.data(), r == 1 ? 9 : 10, DType::kF32);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      ++failures;
    }
  });
  EXPECT_EQ(failures.load(), ranks);
}

TEST(LocalGroupTest, AbortReleasesBlockedRanks) {
  const int ranks = 4;
  auto group = LocalGroup::create(ranks, fastOptions());
  std::atomic<int> lost{0};
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    group->abort(ErrorCode::kPeerLost, "node 1 lost");
  });
  const auto start = std::chrono::steady_clock::now();
  runRanks(ranks - 1, [&](int r) {  // rank 3 never arrives
    std::vector<float> buf(100, 1.0f);
    try {
      group->communicator(r)->allReduceSum(buf.data(), buf.size(), DType::kF32);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kPeerLost);
      EXPECT_STREQ(e.what(), "node 1 lost");
      ++lost;
    }
  });
  aborter.join();
  EXPECT_EQ(lost.load(), ranks - 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  // Sticky: later calls fail at once.
  std::vector<float> buf(1);
  EXPECT_THROW(group->communicator(0)->barrier(), Error);
}

TEST(LocalGroupTest, RejectsBadArguments) {
  EXPECT_THROW(LocalGroup::create(0), Error);
  auto group = LocalGroup::create(2, fastOptions());
  EXPECT_THROW(group->communicator(2), Error);
  EXPECT_THROW(group->communicator(-1), Error);
}

}  // namespace
}  // namespace tpnode::collectives
