// All-gather, broadcast, barrier, lossy wire formats and failures of the hierarchical
// communicator, nodes as threads over FakeNetwork.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <iostream>

#include "collectives/hierarchical.h"
#include "tests/collectives/cluster_harness.h"

namespace tpnode::collectives {
namespace {

using testing::Bytes;

Bytes rankData(int global, size_t count, DType dtype) {
  return testing::makeData(count, dtype, 4242u + static_cast<uint32_t>(global));
}

TEST(HierarchicalOpsTest, AllGatherInGlobalRankOrder) {
  for (int nodes : {1, 2, 3}) {
    for (int locals : {1, 2, 4}) {
      const size_t count = 37;
      const DType dtype = DType::kF16;
      const int size = nodes * locals;
      Bytes expected;
      for (int g = 0; g < size; ++g) {
        Bytes b = rankData(g, count, dtype);
        expected.insert(expected.end(), b.begin(), b.end());
      }
      std::vector<Bytes> out(static_cast<size_t>(size), Bytes(expected.size()));
      testing::runCluster(nodes, locals, testing::testOptions(InterAlgo::kAuto, HierMode::kAuto),
                          [&](Communicator& comm, int, int) {
                            const Bytes in = rankData(comm.rank(), count, dtype);
                            comm.allGather(in.data(), out[comm.rank()].data(), count, dtype);
                          });
      for (int g = 0; g < size; ++g) ASSERT_EQ(out[g], expected) << nodes << "x" << locals;
    }
  }
}

TEST(HierarchicalOpsTest, GatherToEveryRootInGlobalRankOrder) {
  for (int nodes : {1, 2, 3}) {
    for (int locals : {1, 2}) {
      const size_t count = 1000;
      const DType dtype = DType::kF32;
      const int size = nodes * locals;
      const size_t total = static_cast<size_t>(size) * rankData(0, count, dtype).size();
      // Every root in turn, several rounds back to back (the senders do not wait for the
      // root, so consecutive gathers must not mix).
      for (int root = 0; root < size; ++root) {
        std::vector<Bytes> out(static_cast<size_t>(size), Bytes(total));
        testing::runCluster(nodes, locals, testing::testOptions(InterAlgo::kAuto, HierMode::kAuto),
                            [&](Communicator& comm, int, int) {
                              for (int round = 0; round < 3; ++round) {
                                const Bytes in = rankData(comm.rank() + round * 100, count, dtype);
                                comm.gather(in.data(), out[comm.rank()].data(), count, dtype, root);
                                if (comm.rank() != root) continue;
                                Bytes want;
                                for (int g = 0; g < size; ++g) {
                                  Bytes b = rankData(g + round * 100, count, dtype);
                                  want.insert(want.end(), b.begin(), b.end());
                                }
                                EXPECT_EQ(out[comm.rank()], want)
                                    << nodes << "x" << locals << " root " << root;
                              }
                              EXPECT_THROW(comm.gather(nullptr, nullptr, 0, dtype, size), Error);
                            });
      }
    }
  }
}

TEST(HierarchicalOpsTest, BroadcastFromEveryRoot) {
  const int nodes = 3, locals = 2, size = 6;
  const size_t count = 1001;
  std::atomic<int> checked{0};
  testing::runCluster(nodes, locals, testing::testOptions(InterAlgo::kAuto, HierMode::kAuto),
                      [&](Communicator& comm, int, int) {
                        for (int root = 0; root < size; ++root) {
                          Bytes buf = rankData(comm.rank(), count, DType::kF32);
                          comm.broadcast(buf.data(), count, DType::kF32, root);
                          EXPECT_EQ(buf, rankData(root, count, DType::kF32));
                          ++checked;
                        }
                        EXPECT_THROW(comm.broadcast(nullptr, 0, DType::kF32, size), Error);
                      });
  EXPECT_EQ(checked.load(), size * size);
}

TEST(HierarchicalOpsTest, BarrierOrdersAllRanks) {
  const int nodes = 3, locals = 2;
  std::atomic<int> arrived{0};
  testing::runCluster(nodes, locals, testing::testOptions(InterAlgo::kAuto, HierMode::kAuto),
                      [&](Communicator& comm, int, int) {
                        for (int round = 1; round <= 20; ++round) {
                          ++arrived;
                          comm.barrier();
                          EXPECT_GE(arrived.load(), round * nodes * locals);
                          comm.barrier();
                        }
                      });
}

// Lossy wire formats: every rank still holds identical bits; the error against the exact sum
// is bounded (and printed: docs/collectives.md quotes these lines).
TEST(HierarchicalOpsTest, LossyWireFormatsAreIdenticalAndBounded) {
  const int nodes = 4, locals = 2;
  const size_t count = 100003;
  for (WireFormat wire : {WireFormat::kBF16, WireFormat::kQ8_0}) {
    for (InterAlgo algo : {InterAlgo::kDirect, InterAlgo::kTree, InterAlgo::kRing}) {
      CollectiveOptions o = testing::testOptions(algo, HierMode::kSliced);
      o.wire = wire;
      o.chunk_bytes = 4096;
      std::vector<std::vector<Bytes>> data(nodes);
      for (int n = 0; n < nodes; ++n) {
        for (int l = 0; l < locals; ++l)
          data[n].push_back(rankData(n * locals + l, count, DType::kF32));
      }
      const auto inputs = data;
      testing::runCluster(nodes, locals, o, [&](Communicator& comm, int n, int l) {
        comm.allReduceSum(data[n][l].data(), count, DType::kF32);
      });
      double max_abs = 0, sum_sq_err = 0, sum_sq = 0;
      for (size_t i = 0; i < count; ++i) {
        double exact = 0;
        for (const auto& node : inputs) {
          for (const Bytes& b : node) exact += testing::loadElem(b, i, DType::kF32);
        }
        const double got = testing::loadElem(data[0][0], i, DType::kF32);
        max_abs = std::max(max_abs, std::fabs(got - exact));
        sum_sq_err += (got - exact) * (got - exact);
        sum_sq += exact * exact;
      }
      for (int n = 0; n < nodes; ++n) {
        for (int l = 0; l < locals; ++l) ASSERT_EQ(data[n][l], data[0][0]);
      }
      const double rel_rms = std::sqrt(sum_sq_err / sum_sq);
      std::cout << "[wire] " << (wire == WireFormat::kBF16 ? "bf16" : "q8_0") << " "
                << interAlgoName(algo) << " nodes=" << nodes << " locals=" << locals
                << " inputs U(-1,1): max_abs_err=" << max_abs << " rel_rms_err=" << rel_rms << "\n";
      EXPECT_GT(max_abs, 0.0);  // it is lossy
      EXPECT_LT(rel_rms, wire == WireFormat::kBF16 ? 0.01 : 0.03);
    }
  }
}

TEST(HierarchicalOpsTest, LayoutMismatchIsRefused) {
  std::atomic<int> mismatches{0};
  EXPECT_ANY_THROW(testing::runCluster(2, 2,
                                       testing::testOptions(InterAlgo::kAuto, HierMode::kAuto),
                                       [&](Communicator&, int, int) {}, {}, {2, 1}));
  (void)mismatches;
}

// Nodes whose collective options differ would send different messages and wait forever:
// create() refuses, naming the setting and both values.
TEST(HierarchicalOpsTest, OptionMismatchIsRefusedNamingTheSetting) {
  struct Case {
    void (*change)(CollectiveOptions&);
    const char* expect;
  };
  const Case cases[] = {
      {[](CollectiveOptions& o) { o.algo = InterAlgo::kRing; }, "TPNODE_COLL_ALGO = ring"},
      {[](CollectiveOptions& o) { o.small_algo = InterAlgo::kTree; },
       "TPNODE_COLL_SMALL_ALGO = tree"},
      {[](CollectiveOptions& o) { o.crossover_bytes = 4096; }, "TPNODE_COLL_CROSSOVER = 4096"},
      {[](CollectiveOptions& o) { o.wire = WireFormat::kBF16; },
       "= bf16, this node (node 0) native"},
  };
  for (const Case& c : cases) {
    auto net = testing::FakeNetwork::create(2);
    std::vector<std::unique_ptr<mesh::Mesh>> meshes;
    for (int n = 0; n < 2; ++n) meshes.push_back(net->mesh(n));
    std::vector<std::string> errors(2);
    std::vector<ErrorCode> codes(2, ErrorCode::kInternal);
    testing::runRanks(2, [&](int n) {
      CollectiveOptions o = testing::testOptions(InterAlgo::kAuto, HierMode::kAuto);
      if (n == 1) c.change(o);
      try {
        NodeGroup::create(meshes[static_cast<size_t>(n)].get(), 1, o);
      } catch (const Error& e) {
        errors[static_cast<size_t>(n)] = e.what();
        codes[static_cast<size_t>(n)] = e.code();
      }
    });
    EXPECT_EQ(codes[0], ErrorCode::kMismatch) << errors[0];
    EXPECT_EQ(codes[1], ErrorCode::kMismatch) << errors[1];
    EXPECT_NE(errors[0].find(c.expect), std::string::npos) << errors[0];
  }
}

// A node dies in the middle of large all-reduces: every surviving rank throws kPeerLost in
// time, and later calls fail at once.
TEST(HierarchicalOpsTest, PeerKilledMidAllReduceReleasesEverySurvivor) {
  for (InterAlgo algo : {InterAlgo::kRing, InterAlgo::kDirect, InterAlgo::kTree}) {
    const int nodes = 4, locals = 2, victim = 2;
    auto net = testing::FakeNetwork::create(nodes);
    std::atomic<int> started{0}, lost{0}, victim_errors{0};
    std::thread killer([&] {
      while (started.load() < nodes * locals) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      net->kill(victim);
    });
    const auto t0 = std::chrono::steady_clock::now();
    CollectiveOptions o = testing::testOptions(algo, HierMode::kSliced);
    o.chunk_bytes = 64 * 1024;
    testing::runCluster(
        nodes, locals, o,
        [&](Communicator& comm, int n, int) {
          std::vector<float> buf(1 << 20, 1.0f);
          ++started;
          try {
            for (int i = 0; i < 100000; ++i) comm.allReduceSum(buf.data(), buf.size(), DType::kF32);
            ADD_FAILURE() << "all-reduce kept working after the kill";
          } catch (const Error& e) {
            if (n == victim) {
              ++victim_errors;
              return;
            }
            EXPECT_EQ(e.code(), ErrorCode::kPeerLost) << e.what();
            ++lost;
          }
          EXPECT_THROW(comm.allReduceSum(buf.data(), 4, DType::kF32), Error);
        },
        net);
    killer.join();
    EXPECT_EQ(lost.load(), (nodes - 1) * locals);
    EXPECT_EQ(victim_errors.load(), locals);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  }
}

}  // namespace
}  // namespace tpnode::collectives
