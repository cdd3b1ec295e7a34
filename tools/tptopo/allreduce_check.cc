#include "tools/tptopo/allreduce_check.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "collectives/hierarchical.h"
#include "collectives/topology.h"
#include "collectives/verify.h"
#include "common/error.h"
#include "node/placement.h"

namespace tpnode::tptopo {
namespace {

// Correctness sizes (f32 elements): 1 KiB (leader, direct), 64 KiB (sliced, direct), 1 MiB
// (sliced, ring) with the default thresholds; the actual choice is reported per size.
constexpr size_t kCaseCounts[] = {256, 16 * 1024, 256 * 1024};
constexpr size_t kBenchCounts[] = {16 * 1024, 256 * 1024};

std::string interName(const collectives::CollectiveOptions& coll, int nodes, size_t bytes) {
  if (nodes == 1) return "none";
  return std::string(collectives::interAlgoName(collectives::chooseInterAlgo(coll, bytes)));
}

struct Shared {
  std::mutex mu;
  std::string error;                    // first error of any rank; guarded by mu
  std::vector<AllReduceCase> cases;     // rank 0 writes
  std::vector<AllReduceBench> bench;    // rank 0 writes
  std::vector<std::string> mismatches;  // per case: first wrong value on any rank; guarded by mu
};

void rankBody(collectives::Communicator& comm, const TopoOptions& o, Shared& sh, bool leader) {
  std::vector<float> buf;
  size_t c = 0;
  for (size_t count : kCaseCounts) {
    // The shared verify-by-reduction (collectives/verify.h): known integer values, exact sums.
    const collectives::VerifyResult check = collectives::verifyAllReduce(comm, count);
    if (!check.ok) {
      std::lock_guard lock(sh.mu);
      if (sh.mismatches[c].empty()) {
        sh.mismatches[c] = fmt::format("global rank {}: {}", comm.rank(), check.describe());
      }
    }
    ++c;
  }
  size_t b = 0;
  for (size_t count : kBenchCounts) {
    buf.assign(count, 1.0f);
    std::vector<double> us;
    comm.barrier();
    for (int it = 0; it < o.allreduce_iters; ++it) {
      auto t0 = std::chrono::steady_clock::now();
      comm.allReduceSum(buf.data(), count, collectives::DType::kF32);
      us.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      std::fill(buf.begin(), buf.end(), 1.0f);
    }
    if (leader) {
      std::sort(us.begin(), us.end());
      AllReduceBench& r = sh.bench[b];
      r.iterations = o.allreduce_iters;
      r.us_p50 = us[us.size() / 2];
      const double bytes = static_cast<double>(r.bytes);
      r.algbw_gbps = bytes / r.us_p50 / 1e3;
      r.busbw_gbps = r.algbw_gbps * 2.0 * (comm.size() - 1) / comm.size();
    }
    ++b;
  }
}

// The sizes, and what the collectives will choose for each (before anything runs).
void planResult(AllReduceResult& result, Shared& sh, int nodes,
                const collectives::CollectiveOptions& coll) {
  auto hier = [&](size_t bytes) -> std::string {
    if (nodes == 1) return "local";
    return std::string(collectives::hierModeName(collectives::chooseHierMode(coll, bytes)));
  };
  sh.mismatches.assign(std::size(kCaseCounts), "");
  for (size_t count : kCaseCounts) {
    const size_t bytes = count * sizeof(float);
    result.cases.push_back({bytes, hier(bytes), interName(coll, nodes, bytes), false, ""});
  }
  for (size_t count : kBenchCounts) {
    AllReduceBench r;
    r.bytes = count * sizeof(float);
    r.hier = hier(r.bytes);
    r.inter = interName(coll, nodes, r.bytes);
    sh.bench.push_back(r);
  }
}

// Runs every local rank as a thread; the first error of any rank ends up in sh.error.
// `resolved`: the options as the group resolved them (the measured small-message algorithm).
void runRanks(mesh::Mesh* mesh, const TopoOptions& o, const collectives::CollectiveOptions& coll,
              const std::vector<int>& cpu_of_rank, Shared& sh,
              collectives::CollectiveOptions& resolved) {
  const int tp = o.node.tp;
  try {
    auto group = collectives::NodeGroup::create(mesh, tp, coll);
    resolved = group->options();
    std::vector<std::thread> threads;
    for (int r = 0; r < tp; ++r) {
      threads.emplace_back([&, r] {
        if (static_cast<size_t>(r) < cpu_of_rank.size()) {
          node::pinThisThread(cpu_of_rank[static_cast<size_t>(r)]);
        }
        try {
          auto comm = group->communicator(r);
          rankBody(*comm, o, sh, r == 0);
        } catch (const std::exception& e) {
          std::lock_guard lock(sh.mu);
          if (sh.error.empty()) sh.error = e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
  } catch (const Error& e) {
    sh.error = e.what();
  }
}

}  // namespace

AllReduceResult runAllReduceCheck(mesh::Mesh* mesh, const TopoOptions& o,
                                  const collectives::Layout& layout,
                                  const collectives::CollectiveOptions& coll,
                                  const std::vector<int>& cpu_of_rank) {
  AllReduceResult result;
  const int nodes = layout.nodes();
  if (const auto refusal = layout.refusal("--tp-layout")) {  // the same on every node
    result.ranks = layout.wellFormed() ? layout.worldSize() : 0;
    result.error = "not run: tpnode would refuse the layout (" + refusal->message + ")";
    return result;
  }
  Shared sh;
  collectives::CollectiveOptions resolved = coll;
  try {
    const collectives::Topology topo =
        collectives::Topology::fromLayout(layout, mesh != nullptr ? mesh->nodeId() : 0);
    result.ranks = topo.worldSize();
    if (result.ranks == 1) return result;  // not run: skipped
    result.ran = true;
    planResult(result, sh, nodes, coll);
    spdlog::info("[tptopo] hierarchical all-reduce: {} node(s) x {} rank(s), {} sizes checked",
                 nodes, topo.ranksPerNode(), std::size(kCaseCounts));
    runRanks(mesh, o, coll, cpu_of_rank, sh, resolved);
  } catch (const Error& e) {  // e.g. a node id outside the layout
    result.ran = true;
    planResult(result, sh, nodes, coll);
    sh.error = e.what();
  }
  // The plan named what the options say; with small_algo auto the group measured its choice.
  for (auto& c : result.cases) c.inter = interName(resolved, nodes, c.bytes);
  for (auto& b : sh.bench) b.inter = interName(resolved, nodes, b.bytes);
  result.verdict = Verdict::kOk;
  if (!sh.error.empty()) {
    result.error = sh.error;
    result.verdict = Verdict::kFailed;
    for (auto& c : result.cases) c.detail = "not completed";
  } else {
    for (size_t c = 0; c < result.cases.size(); ++c) {
      result.cases[c].ok = sh.mismatches[c].empty();
      result.cases[c].detail = result.cases[c].ok ? "correct" : sh.mismatches[c];
      if (!result.cases[c].ok) result.verdict = Verdict::kFailed;
    }
    result.bench = sh.bench;
  }
  if (result.verdict == Verdict::kFailed) {
    spdlog::warn("[tptopo] all-reduce failed: {}",
                 result.error.empty() ? "wrong values" : result.error);
  }
  return result;
}

}  // namespace tpnode::tptopo
