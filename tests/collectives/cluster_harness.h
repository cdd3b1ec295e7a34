// Runs a whole cluster in one process: `nodes` nodes over a FakeNetwork, each with `locals`
// rank threads, and calls fn(comm, node, local) on every rank thread with the rank's
// hierarchical Communicator. Rethrows the first exception of any rank after joining all.
#pragma once

#include <future>
#include <memory>
#include <vector>

#include "collectives/hierarchical.h"
#include "tests/collectives/fake_mesh.h"
#include "tests/collectives/test_util.h"

namespace tpnode::collectives::testing {

using RankFn = std::function<void(Communicator& comm, int node, int local)>;

inline void runCluster(int nodes, int locals, const CollectiveOptions& options, const RankFn& fn,
                       std::shared_ptr<FakeNetwork> net = {},
                       const std::vector<int>& locals_per_node = {}) {
  if (!net) net = FakeNetwork::create(nodes);
  std::vector<std::unique_ptr<mesh::Mesh>> meshes;
  for (int n = 0; n < nodes; ++n) meshes.push_back(net->mesh(n));
  std::vector<std::promise<std::shared_ptr<NodeGroup>>> promises(static_cast<size_t>(nodes));
  std::vector<std::shared_future<std::shared_ptr<NodeGroup>>> groups;
  for (auto& p : promises) groups.push_back(p.get_future().share());
  runRanks(nodes * locals, [&](int g) {
    const int n = g / locals;
    const int l = g % locals;
    const int my_locals =
        locals_per_node.empty() ? locals : locals_per_node[static_cast<size_t>(n)];
    if (l >= my_locals) return;
    if (l == 0) {
      try {
        promises[static_cast<size_t>(n)].set_value(NodeGroup::create(
            nodes > 1 ? meshes[static_cast<size_t>(n)].get() : nullptr, my_locals, options));
      } catch (...) {
        promises[static_cast<size_t>(n)].set_exception(std::current_exception());
        throw;
      }
    }
    auto group = groups[static_cast<size_t>(n)].get();
    auto comm = group->communicator(l);
    fn(*comm, n, l);
  });
}

// Options for tests: small ring chunks, so that small vectors already take many chunks.
inline CollectiveOptions testOptions(InterAlgo algo, HierMode hier) {
  CollectiveOptions o;
  o.spin = std::chrono::microseconds(20);
  o.algo = algo;
  o.hier = hier;
  o.chunk_bytes = 128;
  return o;
}

}  // namespace tpnode::collectives::testing
