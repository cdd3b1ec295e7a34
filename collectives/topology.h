// Topology: where every rank of the cluster lives. One small value type answers every rank
// question (after TensorRT-LLM's runtime/worldConfig.h): how many nodes and ranks, which node and
// local rank a global rank is, which global rank a local rank of this node is, which lane (the
// local rank whose peers on the other nodes it meets in the inter-node exchange) and which device
// a local rank uses.
//
// Numbering (the one rank numbering of tpnode; docs/collectives.md), computed by the Layout it
// holds (layout.h, the one place of rank-count arithmetic):
//   global rank g = node * ranksPerNode + local,   node = g / ranksPerNode,
//   local = g % ranksPerNode,                      lane = local.
//   Global rank 0 is node 0's local rank 0; a node's leader is its local rank 0.
// Pipeline stages: stages() splits the nodes into equal consecutive groups of nodesPerStage()
// nodes, stage s holding nodes s * nodesPerStage() .. (s + 1) * nodesPerStage() - 1 and global
// ranks s * tpSize() .. (s + 1) * tpSize() - 1 (as worldConfig: rank = stage * tp + tp rank).
// The factories build one stage (tpSize() == worldSize(), tpRank(g) == g); withStages() splits
// it. Stage 0 holds node 0, which embeds the tokens, computes the output head and samples
// (docs/architecture.md, "Pipeline stages").
//
// Contract
// - A plain value: immutable after construction, copyable, safe to read from any thread.
// - Every node holds the same shape (nodes, ranks per node, stages); nodeId() and the device
//   list are this node's own.
// - The factories validate their input and throw Error(kInvalidArgument) naming the field and
//   the value; a layout with different ranks per node throws Error(kUnsupported) from
//   fromLayout(), the one place that refuses it (with Layout::refusal()'s reason; tools that
//   report on any layout ask the Layout itself).
// - Queries take ranks inside the topology; a rank outside it throws Error(kInvalidArgument)
//   (it comes from a caller's argument: a gather root, a flag).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "collectives/layout.h"

namespace tpnode::collectives {

class Topology {
 public:
  // One node, one rank: the default of a process without a cluster.
  Topology() = default;

  // `nodes` nodes of `ranks_per_node` local ranks each; this process is node `node_id`.
  // `devices`: the device of each local rank (a CUDA device for GPU ranks, the CPU core a CPU
  // rank is pinned to), one per local rank, or empty for none given.
  static Topology uniform(int nodes, int ranks_per_node, int node_id = 0,
                          std::vector<int> devices = {});

  // From the ranks of every node, index = node id (--tp-layout): a runnable layout only, else
  // Error with the code and message of layout.refusal("--tp-layout") (kUnsupported when the
  // nodes differ: the hierarchical all-reduce pairs local rank r of every node, and the shard
  // plan gives every rank an equal share).
  static Topology fromLayout(const Layout& layout, int node_id, std::vector<int> devices = {});
  static Topology fromLayout(std::span<const int> ranks_per_node, int node_id,
                             std::vector<int> devices = {});

  // This topology cut into `stages` pipeline stages of nodes() / stages nodes each.
  // Error(kInvalidArgument) naming both numbers when `stages` is < 1, above nodes(), or does
  // not divide nodes() (stageRefusal()).
  Topology withStages(int stages) const;
  // Why withStages(stages) refuses a cluster of `nodes` nodes ("" when it accepts it).
  static std::string stageRefusal(int nodes, int stages);

  // Shape.
  int nodes() const { return layout_.nodes(); }
  int ranksPerNode() const { return ranks_per_node_; }
  int worldSize() const { return world_size_; }
  int stages() const { return stages_; }                // pipeline stages (1: tensor only)
  int tpSize() const { return worldSize() / stages_; }  // ranks of one stage
  int nodesPerStage() const { return nodes() / stages_; }
  bool pipelined() const { return stages_ > 1; }
  const Layout& layout() const { return layout_; }  // one entry per node

  // This node.
  int nodeId() const { return node_id_; }
  int firstRank() const { return layout_.firstRankOf(node_id_); }  // global rank of local rank 0
  bool singleNode() const { return nodes() == 1; }

  // Rank arithmetic (see the layout above). `local` is a local rank, `global` a global rank.
  int globalRank(int local) const { return globalRank(node_id_, local); }  // on this node
  int globalRank(int node, int local) const;
  int nodeOf(int global) const;
  int localRankOf(int global) const;
  int laneOf(int global) const { return localRankOf(global); }
  int stageOf(int global) const;
  int tpRank(int global) const;  // rank inside its stage
  // Stages of nodes. stageOfNode(node) = node / nodesPerStage(); firstNodeOf(stage) is the
  // stage's leader node; firstRankOf(stage) its first global rank (tpSize() ranks follow).
  int stageOfNode(int node) const;
  int firstNodeOf(int stage) const;
  int firstRankOf(int stage) const;
  int stage() const { return stageOfNode(node_id_); }  // this node's stage
  bool isFirstStage() const { return stage() == 0; }
  bool isLastStage() const { return stage() == stages_ - 1; }
  bool isOnThisNode(int global) const { return nodeOf(global) == node_id_; }
  static bool isLeader(int local) { return local == 0; }

  // Devices of this node's local ranks.
  bool hasDevices() const { return !devices_.empty(); }
  const std::vector<int>& devices() const { return devices_; }
  int device(int local) const;  // devices()[local]; Error(kInvalidArgument) when none given

  // The devices of `ranks_per_node` local ranks when none are given: local rank r on device
  // r % available (one device each while there are enough; else several ranks share, in
  // turn). Static: placement asks it before any topology exists, also for a --tp it refuses.
  // Error(kInvalidArgument) when `available` < 1 or `ranks_per_node` < 0.
  static std::vector<int> roundRobinDevices(int ranks_per_node, int available);

  // "2 nodes x 4 ranks (8 ranks; node 1: global ranks 4..7)".
  std::string describe() const;

  bool operator==(const Topology&) const = default;

 private:
  Topology(Layout layout, int node_id, std::vector<int> devices);
  void checkLocal(int local) const;
  void checkGlobal(int global) const;

  Layout layout_;           // runnable: every node has ranks_per_node_ ranks
  int ranks_per_node_ = 1;  // layout_.ranksOf(0), kept for the queries of every rank
  int world_size_ = 1;      // layout_.worldSize()
  int stages_ = 1;          // pipeline stages; divides nodes() (withStages)
  int node_id_ = 0;
  std::vector<int> devices_;  // empty, or one per local rank
};

}  // namespace tpnode::collectives
