// NodeGroup: the global tensor-parallel group of a node: its local ranks (threads of this
// process, a LocalGroup) times the nodes of the mesh. Its Topology (collectives/topology.h)
// numbers the ranks: global rank = node_id * local_tp + local_rank, lane = local rank. It hands
// out one hierarchical Communicator per local rank.
//
// Usage (node layer, after Mesh::connect):
//   auto group = collectives::NodeGroup::create(mesh.get(), tp, CollectiveOptions::fromEnv());
//   // in local rank thread r:
//   auto comm = group->communicator(r);
//
// Contract
// - create() is collective over the mesh (every node calls it once, before any collective);
//   it checks that every node has the same local_tp (Error(kMismatch) otherwise). `mesh` may be
//   null for a single node. The Mesh must outlive the group and every communicator.
// - create() installs the mesh event callback (the mesh has one): a lost peer aborts the group
//   (a peer that closed in order aborts it only if an operation still needed it). Events are passed
//   on to `forward` (called on the mesh's thread; must not block).
// - communicator(r): once per local rank; then used only on rank r's thread.
// - All-reduce (documented order in docs/collectives.md):
//     sliced (default above options.leader_max_bytes): local reduce-scatter (rank order) ->
//       each local rank all-reduces its own slice with the same local rank of every node (all
//       lanes on the network at once) -> local all-gather of the slices.
//     leader (small messages): local all-reduce -> local rank 0 all-reduces the whole vector
//       across nodes -> local broadcast.
//   The inter-node step is direct, tree or ring (collectives/inter_node.h); with small_algo
//   kAuto, create() picks direct or tree by measuring both (collectives/small_algo_probe.h).
// - all-gather / broadcast / barrier: local step, then local rank 0 talks to the other nodes,
//   then a local broadcast / barrier.
// - Failure: a collective that fails on any rank aborts the group: every local rank blocked in
//   it throws the same Error, an abort signal is sent to every live peer node (so its ranks
//   blocked on this node throw Error(kPeerLost) too), and every later call throws at once.
#pragma once

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/inter_node.h"
#include "collectives/local_group.h"
#include "collectives/options.h"
#include "collectives/topology.h"
#include "common/mutex.h"
#include "mesh/mesh.h"

namespace tpnode::collectives {

class NodeGroup : public std::enable_shared_from_this<NodeGroup> {
 public:
  static std::shared_ptr<NodeGroup> create(
      mesh::Mesh* mesh, int local_tp, const CollectiveOptions& options,
      std::function<void(const mesh::PeerEvent&)> forward = {});
  ~NodeGroup();
  NodeGroup(const NodeGroup&) = delete;
  NodeGroup& operator=(const NodeGroup&) = delete;

  std::unique_ptr<Communicator> communicator(int local_rank);

  // Nodes x local ranks of this group, this node's id (no device list: placement is the node
  // layer's).
  const Topology& topology() const { return topology_; }
  int nodeId() const { return topology_.nodeId(); }
  int nodeCount() const { return topology_.nodes(); }
  int localSize() const { return topology_.ranksPerNode(); }
  // As given to create(), with small_algo resolved (never kAuto on more than one node).
  const CollectiveOptions& options() const { return options_; }

  // From any thread, never blocks for long: aborts the local group and asks the abort thread
  // to signal the peer nodes. The first reason wins.
  void abort(ErrorCode code, const std::string& reason);

  // Use create().
  NodeGroup(mesh::Mesh* mesh, int local_tp, const CollectiveOptions& options);

 private:
  void checkLayout(int local_tp);
  // options_.small_algo kAuto -> kDirect or kTree (collective: see small_algo_probe.h).
  void resolveSmallAlgo();
  void abortLoop();

  mesh::Mesh* const mesh_;  // may be null; outlives the group (see contract)
  const Topology topology_;
  CollectiveOptions options_;  // small_algo resolved by create()
  std::shared_ptr<LocalGroup> local_;
  std::vector<std::unique_ptr<InterNode>> lanes_;  // one per local rank on more than one node

  Mutex mutex_;
  CondVar wake_;
  bool signal_peers_ TP_GUARDED_BY(mutex_) = false;
  bool stop_ TP_GUARDED_BY(mutex_) = false;
  std::thread abort_thread_;  // sends the abort signal off the mesh's callback thread
};

}  // namespace tpnode::collectives
