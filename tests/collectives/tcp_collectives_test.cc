// The hierarchical collectives over the real TCP mesh, nodes as threads of this process on
// loopback sockets: the same algorithms as hierarchical_test.cc, with the real data path.
#include <gtest/gtest.h>

#include <future>

#include "collectives/hierarchical.h"
#include "common/log.h"
#include "tests/collectives/test_util.h"
#include "tests/mesh/free_ports.h"

namespace tpnode::collectives {
namespace {

using testing::Bytes;

// spdlog's registry is created lazily inside the (uninstrumented) shared library; create it on
// the main thread first, so ThreadSanitizer sees no racy first use.
[[maybe_unused]] const auto* const kLoggerReady = spdlog::default_logger_raw();

std::vector<std::unique_ptr<mesh::Mesh>> connectAll(int n) {
  const std::string peers = mesh::test::loopbackPeers(n);
  std::vector<std::future<std::unique_ptr<mesh::Mesh>>> futures;
  for (int i = 0; i < n; ++i) {
    mesh::MeshOptions o;
    o.node_id = i;
    o.peers = mesh::parsePeerList(peers);
    o.connect_timeout = std::chrono::seconds(20);
    o.cluster_secret = "tcp-collectives-test-secret-32by";
    o.fingerprint = mesh::computeFingerprint({"peers=" + peers});
    o.fingerprint_text = mesh::fingerprintText({"peers=" + peers});
    futures.push_back(std::async(std::launch::async, [o] { return mesh::Mesh::connect(o); }));
  }
  std::vector<std::unique_ptr<mesh::Mesh>> meshes;
  for (auto& f : futures) meshes.push_back(f.get());
  return meshes;
}

// nodes x locals over TCP; `rounds` all-reduces of `count` elements, checked against the
// reference every round.
void run(int nodes, int locals, InterAlgo algo, size_t count, DType dtype, int rounds,
         size_t chunk_bytes) {
  auto meshes = connectAll(nodes);
  CollectiveOptions o;
  o.algo = algo;
  o.hier = HierMode::kSliced;
  o.chunk_bytes = chunk_bytes;
  std::vector<std::vector<Bytes>> inputs(static_cast<size_t>(nodes));
  for (int n = 0; n < nodes; ++n) {
    for (int l = 0; l < locals; ++l) {
      inputs[n].push_back(testing::makeData(count, dtype, static_cast<uint32_t>(n * 10 + l)));
    }
  }
  const Bytes expected =
      testing::referenceAllReduce(inputs, count, dtype, testing::refAlgoOf(algo));
  std::vector<std::promise<std::shared_ptr<NodeGroup>>> promises(static_cast<size_t>(nodes));
  std::vector<std::shared_future<std::shared_ptr<NodeGroup>>> groups;
  for (auto& p : promises) groups.push_back(p.get_future().share());
  testing::runRanks(nodes * locals, [&](int g) {
    const int n = g / locals, l = g % locals;
    if (l == 0) promises[n].set_value(NodeGroup::create(meshes[n].get(), locals, o));
    auto comm = groups[n].get()->communicator(l);
    Bytes buf;
    for (int round = 0; round < rounds; ++round) {
      buf = inputs[n][l];
      comm->allReduceSum(buf.data(), count, dtype);
      ASSERT_EQ(buf, expected) << "round " << round << " node " << n << " local " << l;
    }
    comm->barrier();
  });
  groups.clear();
  for (auto& m : meshes) m->shutdown();
}

TEST(TcpCollectivesTest, RingLargeRepeated) {
  run(2, 1, InterAlgo::kRing, (size_t{16} << 20) / 4, DType::kF32, 20, 256 * 1024);
}

TEST(TcpCollectivesTest, SmallAndOddEveryAlgorithm) {
  for (InterAlgo algo : {InterAlgo::kDirect, InterAlgo::kTree, InterAlgo::kRing}) {
    for (size_t count : {size_t{1}, size_t{17}, size_t{4099}}) {
      run(3, 2, algo, count, DType::kBF16, 3, 256);
    }
  }
}

}  // namespace
}  // namespace tpnode::collectives
