// coll_node: a test-only driver that runs ONE node of a collectives cluster as a real process
// over the real TCP mesh (collectives_multiprocess_test starts several on loopback).
//
//   coll_node --node-id N --peers a:p,b:q --tp T [--algo direct|tree|ring|auto]
//             [--hier sliced|leader|auto] [--dtype f32|f16|bf16] [--counts 1,17,4099]
//             [--rounds R] [--loop-seconds S] [--liveness-ms L]
//
// Verify mode (default): every local rank all-reduces deterministic pseudo-random data of every
// count `rounds` times and compares with the serial reference of the documented order, which
// each process computes itself from the same seeds. Loop mode (--loop-seconds): all-reduces the
// first count until the time is up (the peer-kill test kills a node meanwhile); prints
// "looping" once the first call has completed.
// Exit codes: 0 ok, 1 wrong result, 3 Error(kPeerLost), 2 any other error.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>

#include "collectives/hierarchical.h"
#include "mesh/secret.h"
#include "tests/collectives/test_util.h"

namespace tpnode::collectives {
namespace {

using testing::Bytes;

std::vector<size_t> parseCounts(const std::string& text) {
  std::vector<size_t> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    out.push_back(std::stoull(text.substr(start, end - start)));
    start = end + 1;
  }
  return out;
}

DType parseDType(const std::string& s) {
  return s == "f16" ? DType::kF16 : s == "bf16" ? DType::kBF16 : DType::kF32;
}

int run(std::map<std::string, std::string> a) {
  const int node = std::stoi(a["--node-id"]);
  const int tp = std::stoi(a.count("--tp") ? a["--tp"] : "1");
  const DType dtype = parseDType(a["--dtype"]);
  const std::vector<size_t> counts = parseCounts(a.count("--counts") ? a["--counts"] : "1,17");
  const int rounds = std::stoi(a.count("--rounds") ? a["--rounds"] : "1");
  const double loop_s = std::stod(a.count("--loop-seconds") ? a["--loop-seconds"] : "0");
  CollectiveOptions o;
  o.algo = parseInterAlgo(a.count("--algo") ? a["--algo"] : "auto");
  o.hier = parseHierMode(a.count("--hier") ? a["--hier"] : "auto");
  o.chunk_bytes = 64 * 1024;

  mesh::MeshOptions m;
  m.node_id = node;
  m.peers = mesh::parsePeerList(a["--peers"]);
  m.connect_timeout = std::chrono::seconds(30);
  m.liveness_timeout =
      std::chrono::milliseconds(std::stoi(a.count("--liveness-ms") ? a["--liveness-ms"] : "5000"));
  m.heartbeat_interval = std::min(std::chrono::milliseconds(500), m.liveness_timeout / 4);
  m.cluster_secret = mesh::loadClusterSecret("");  // TPNODE_CLUSTER_SECRET, set by the test
  m.fingerprint = mesh::computeFingerprint({"peers=" + a["--peers"]});
  m.fingerprint_text = mesh::fingerprintText({"peers=" + a["--peers"]});
  auto mesh = mesh::Mesh::connect(m);
  const int nodes = mesh->nodeCount();
  auto group = NodeGroup::create(mesh.get(), tp, o);

  std::atomic<int> wrong{0};
  std::atomic<bool> announced{false};
  testing::runRanks(tp, [&](int l) {
    auto comm = group->communicator(l);
    if (loop_s > 0) {
      std::vector<float> buf(counts[0], 1.0f);
      const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(loop_s);
      while (std::chrono::steady_clock::now() < end) {
        comm->allReduceSum(buf.data(), buf.size(), DType::kF32);
        if (!announced.exchange(true)) std::printf("looping\n"), std::fflush(stdout);
      }
      return;
    }
    for (size_t count : counts) {
      std::vector<std::vector<Bytes>> inputs(static_cast<size_t>(nodes));
      for (int n = 0; n < nodes; ++n) {
        for (int k = 0; k < tp; ++k) {
          inputs[n].push_back(
              testing::makeData(count, dtype, static_cast<uint32_t>(n * 1000 + k * 7 + count)));
        }
      }
      const InterAlgo algo = chooseInterAlgo(group->options(), count * dtypeSize(dtype));
      const Bytes expected = testing::referenceAllReduce(
          inputs, count, dtype, testing::refAlgoOf(algo), o.hier != HierMode::kLeader);
      for (int r = 0; r < rounds; ++r) {
        Bytes buf = inputs[node][l];
        comm->allReduceSum(buf.data(), count, dtype);
        if (buf != expected) {
          std::fprintf(stderr, "node %d local %d count %zu round %d: wrong result\n", node, l,
                       count, r);
          ++wrong;
        }
      }
    }
    comm->barrier();
  });
  group.reset();
  mesh->shutdown();
  std::printf("node %d: %s\n", node, wrong.load() == 0 ? "all results exact" : "WRONG results");
  return wrong.load() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace tpnode::collectives

int main(int argc, char** argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i + 1 < argc; i += 2) args[argv[i]] = argv[i + 1];
  try {
    return tpnode::collectives::run(args);
  } catch (const tpnode::Error& e) {
    std::fprintf(stderr, "coll_node: %s\n", e.what());
    std::printf("error %s\n", std::string(tpnode::errorCodeName(e.code())).c_str());
    return e.code() == tpnode::ErrorCode::kPeerLost ? 3 : 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "coll_node: %s\n", e.what());
    return 2;
  }
}
