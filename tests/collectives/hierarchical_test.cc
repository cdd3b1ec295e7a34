// The hierarchical all-reduce against the serial reference, nodes as threads over FakeNetwork.
#include "collectives/hierarchical.h"

#include <gtest/gtest.h>

#include "tests/collectives/cluster_harness.h"

namespace tpnode::collectives {
namespace {

using testing::Bytes;
using testing::RefAlgo;

using Inputs = std::vector<std::vector<Bytes>>;  // [node][local]

Inputs makeInputs(int nodes, int locals, size_t count, DType dtype, bool integers = false) {
  Inputs in(static_cast<size_t>(nodes));
  for (int n = 0; n < nodes; ++n) {
    for (int l = 0; l < locals; ++l) {
      const auto seed =
          static_cast<uint32_t>(n * 131 + l * 17 + count * 3 + static_cast<int>(dtype));
      in[static_cast<size_t>(n)].push_back(testing::makeData(count, dtype, seed, integers));
    }
  }
  return in;
}

// Runs one all-reduce per (count, dtype) on one cluster and compares every rank's result with
// the reference of the documented order.
void checkAllReduce(int nodes, int locals, InterAlgo algo, HierMode hier,
                    const std::vector<size_t>& counts, const std::vector<DType>& dtypes,
                    size_t chunk_bytes = 128) {
  struct Job {
    size_t count;
    DType dtype;
    Inputs inputs;
    Inputs results;
  };
  std::vector<Job> jobs;
  for (size_t count : counts) {
    for (DType dtype : dtypes) {
      Inputs in = makeInputs(nodes, locals, count, dtype);
      jobs.push_back({count, dtype, in, in});
    }
  }
  CollectiveOptions options = testing::testOptions(algo, hier);
  options.chunk_bytes = chunk_bytes;
  testing::runCluster(nodes, locals, options, [&](Communicator& comm, int n, int l) {
    EXPECT_EQ(comm.rank(), n * locals + l);
    EXPECT_EQ(comm.size(), nodes * locals);
    for (Job& job : jobs) {
      Bytes& mine = job.results[static_cast<size_t>(n)][static_cast<size_t>(l)];
      comm.allReduceSum(mine.data(), job.count, job.dtype);
    }
  });
  const RefAlgo ref = testing::refAlgoOf(algo);
  for (const Job& job : jobs) {
    const Bytes expected = testing::referenceAllReduce(job.inputs, job.count, job.dtype, ref,
                                                       hier != HierMode::kLeader);
    for (int n = 0; n < nodes; ++n) {
      for (int l = 0; l < locals; ++l) {
        ASSERT_EQ(job.results[static_cast<size_t>(n)][static_cast<size_t>(l)], expected)
            << "count " << job.count << " " << dtypeName(job.dtype) << " node " << n << " local "
            << l;
      }
    }
  }
}

struct Layout {
  int nodes;
  int locals;
  InterAlgo algo;
};

class AllReduceMatrixTest : public ::testing::TestWithParam<Layout> {};

TEST_P(AllReduceMatrixTest, SlicedMatchesReference) {
  const auto [nodes, locals, algo] = GetParam();
  checkAllReduce(nodes, locals, algo, HierMode::kSliced, {1, 2, 13, 100, 1031},
                 {DType::kF32, DType::kF16, DType::kBF16});
}

TEST_P(AllReduceMatrixTest, LeaderMatchesReference) {
  const auto [nodes, locals, algo] = GetParam();
  checkAllReduce(nodes, locals, algo, HierMode::kLeader, {1, 13, 1031},
                 {DType::kF32, DType::kBF16});
}

std::vector<Layout> layouts() {
  std::vector<Layout> out;
  for (int nodes : {1, 2, 3, 4}) {
    for (int locals : {1, 2, 4}) {
      for (InterAlgo algo : {InterAlgo::kDirect, InterAlgo::kTree, InterAlgo::kRing}) {
        out.push_back({nodes, locals, algo});
      }
    }
  }
  return out;
}

std::string layoutName(const ::testing::TestParamInfo<Layout>& p) {
  return fmt::format("n{}_l{}_{}", p.param.nodes, p.param.locals, interAlgoName(p.param.algo));
}

INSTANTIATE_TEST_SUITE_P(Layouts, AllReduceMatrixTest, ::testing::ValuesIn(layouts()), layoutName);

TEST(HierarchicalTest, LargeRing64MiB) {
  checkAllReduce(2, 2, InterAlgo::kRing, HierMode::kSliced, {(size_t{64} << 20) / 4}, {DType::kF32},
                 256 * 1024);
}

TEST(HierarchicalTest, LargeOddDirectTreeAndRing) {
  checkAllReduce(3, 1, InterAlgo::kDirect, HierMode::kSliced, {(size_t{4} << 20) + 3},
                 {DType::kBF16}, 4096);
  checkAllReduce(4, 2, InterAlgo::kTree, HierMode::kSliced, {(size_t{2} << 20) + 5},
                 {DType::kF32, DType::kF16});
  checkAllReduce(3, 2, InterAlgo::kRing, HierMode::kSliced, {(size_t{1} << 20) + 7}, {DType::kF16});
}

TEST(HierarchicalTest, IntegerDataIsExactWhateverTheAlgorithm) {
  const int nodes = 3, locals = 2;
  const size_t count = 777;
  const Inputs inputs = makeInputs(nodes, locals, count, DType::kF32, /*integers=*/true);
  std::vector<Bytes> outcomes;
  for (InterAlgo algo : {InterAlgo::kDirect, InterAlgo::kTree, InterAlgo::kRing}) {
    for (HierMode hier : {HierMode::kSliced, HierMode::kLeader}) {
      Inputs results = inputs;
      testing::runCluster(nodes, locals, testing::testOptions(algo, hier),
                          [&](Communicator& comm, int n, int l) {
                            comm.allReduceSum(results[n][l].data(), count, DType::kF32);
                          });
      outcomes.push_back(results[2][1]);
    }
  }
  for (size_t i = 0; i < count; ++i) {
    float sum = 0;
    for (const auto& node : inputs) {
      for (const Bytes& b : node) sum += testing::loadElem(b, i, DType::kF32);
    }
    for (const Bytes& o : outcomes) ASSERT_EQ(testing::loadElem(o, i, DType::kF32), sum);
  }
}

TEST(HierarchicalTest, AutoChoosesAndStaysIdenticalAcrossRanks) {
  const int nodes = 2, locals = 2;
  CollectiveOptions o = testing::testOptions(InterAlgo::kAuto, HierMode::kAuto);
  o.crossover_bytes = 4096;
  o.leader_max_bytes = 256;
  std::vector<size_t> counts = {3, 100, 1000, 5000};
  Inputs results[4];
  for (size_t c = 0; c < counts.size(); ++c)
    results[c] = makeInputs(nodes, locals, counts[c], DType::kF32);
  testing::runCluster(nodes, locals, o, [&](Communicator& comm, int n, int l) {
    for (size_t c = 0; c < counts.size(); ++c)
      comm.allReduceSum(results[c][n][l].data(), counts[c], DType::kF32);
  });
  for (size_t c = 0; c < counts.size(); ++c) {
    for (int n = 0; n < nodes; ++n) {
      for (int l = 0; l < locals; ++l) ASSERT_EQ(results[c][n][l], results[c][0][0]);
    }
  }
}

// small_algo auto: from 3 nodes create() measures direct against tree and every node takes
// node 0's choice; 2 nodes and forced algorithms do not measure.
TEST(HierarchicalTest, SmallAlgoAutoIsResolvedAlikeOnEveryNode) {
  auto resolve = [](int nodes, const CollectiveOptions& o) {
    auto net = testing::FakeNetwork::create(nodes);
    std::vector<std::unique_ptr<mesh::Mesh>> meshes;
    for (int n = 0; n < nodes; ++n) meshes.push_back(net->mesh(n));
    std::vector<InterAlgo> chosen(static_cast<size_t>(nodes));
    testing::runRanks(nodes, [&](int n) {
      auto group = NodeGroup::create(meshes[static_cast<size_t>(n)].get(), 1, o);
      chosen[static_cast<size_t>(n)] = group->options().small_algo;
    });
    return chosen;
  };
  CollectiveOptions o = testing::testOptions(InterAlgo::kAuto, HierMode::kAuto);
  for (int nodes : {3, 4}) {
    const auto chosen = resolve(nodes, o);
    EXPECT_TRUE(chosen[0] == InterAlgo::kDirect || chosen[0] == InterAlgo::kTree)
        << interAlgoName(chosen[0]);
    for (InterAlgo a : chosen) EXPECT_EQ(a, chosen[0]) << nodes << " nodes";
  }
  for (InterAlgo a : resolve(2, o)) EXPECT_EQ(a, InterAlgo::kDirect);
  CollectiveOptions forced_tree = o;
  forced_tree.small_algo = InterAlgo::kTree;
  for (InterAlgo a : resolve(2, forced_tree)) EXPECT_EQ(a, InterAlgo::kTree);
  CollectiveOptions ring = testing::testOptions(InterAlgo::kRing, HierMode::kAuto);
  for (InterAlgo a : resolve(4, ring)) EXPECT_EQ(a, InterAlgo::kDirect);
}

TEST(HierarchicalTest, ChooseInterAlgoFollowsTheCrossover) {
  CollectiveOptions o;
  o.crossover_bytes = 4096;
  EXPECT_EQ(chooseInterAlgo(o, 4095), InterAlgo::kDirect);  // small_algo not resolved yet
  o.small_algo = InterAlgo::kTree;
  EXPECT_EQ(chooseInterAlgo(o, 4095), InterAlgo::kTree);
  EXPECT_EQ(chooseInterAlgo(o, 4096), InterAlgo::kRing);
  o.algo = InterAlgo::kDirect;
  EXPECT_EQ(chooseInterAlgo(o, 1 << 20), InterAlgo::kDirect);
  EXPECT_EQ(parseSmallAlgo("tree"), InterAlgo::kTree);
  EXPECT_THROW(parseSmallAlgo("ring"), Error);
}

}  // namespace
}  // namespace tpnode::collectives
