// Layout: how many ranks each node runs, as given (--tp-layout, the YAML file's nodes[].tp,
// --tp on every node), whether tpnode can run it or not. It is the one place of rank-count
// arithmetic: the global numbering of ranks, the world size, the node and local rank of a
// global rank. collectives::Topology (topology.h) holds a runnable Layout and answers every
// rank question through it; tools/tptopo reports on any Layout, runnable or not, with the
// reason refusal() gives, which is the reason Topology::fromLayout() throws.
//
// Numbering (docs/collectives.md): nodes in order, each node's local ranks in order. Node n holds
// global ranks firstRankOf(n) .. firstRankOf(n) + ranksOf(n) - 1; in a uniform layout of R ranks
// per node, global = node * R + local.
//
// Contract
// - A plain value: immutable after construction, copyable, safe to read from any thread.
// - Constructing from a list never throws: any list is a Layout. refusal() says what keeps
//   tpnode from running it: Error code kInvalidArgument for a malformed layout (no node, more
//   than kMaxNodes nodes, a node outside 1..kMaxRanksPerNode ranks), kUnsupported for a
//   well-formed one whose nodes differ (the hierarchical all-reduce pairs local rank r of every
//   node, and the shard plan gives every rank an equal share).
// - Rank arithmetic (worldSize() and below) needs a well-formed layout; on a malformed one it
//   throws Error(kInvalidArgument) with refusal()'s message. A node or rank outside the layout
//   throws Error(kInvalidArgument) (it comes from a caller's argument).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace tpnode::collectives {

inline constexpr int kMaxNodes = 65536;  // the mesh sets no limit; this keeps ranks in an int
inline constexpr int kMaxRanksPerNode = 1024;

// Why a layout cannot run.
struct LayoutRefusal {
  ErrorCode code = ErrorCode::kInvalidArgument;
  std::string message;  // names the setting: "--tp-layout 2,1: nodes with different tp ..."
};

class Layout {
 public:
  Layout() : Layout(std::vector<int>{1}) {}  // one node, one rank
  explicit Layout(std::vector<int> ranks_per_node);
  // `nodes` nodes of `ranks_per_node` ranks; Error(kInvalidArgument) when `nodes` is outside
  // 0..kMaxNodes (the list itself could not be built); any `ranks_per_node` is kept as given.
  static Layout uniform(int nodes, int ranks_per_node);

  // As given.
  const std::vector<int>& ranksPerNode() const { return ranks_; }
  int nodes() const { return static_cast<int>(ranks_.size()); }
  std::string text() const;  // "2,1"

  // What tpnode can run. `flag` names the setting in the message ("--tp-layout", "nodes[].tp").
  bool wellFormed() const { return !first_.empty(); }
  bool sameOnEveryNode() const;  // well formed, every node the same
  std::optional<LayoutRefusal> refusal(std::string_view flag = "--tp-layout") const;
  bool runnable() const { return sameOnEveryNode(); }

  // Rank arithmetic (well-formed layouts; see the numbering above).
  int worldSize() const;
  int ranksOf(int node) const;
  int firstRankOf(int node) const;
  int globalRank(int node, int local) const;
  int nodeOf(int global) const;
  int localRankOf(int global) const;

  // "2 nodes, 3 ranks: node 0 global ranks 0..1, node 1 global rank 2"; a malformed layout
  // reads as its list ("2,0").
  std::string describe() const;

  bool operator==(const Layout& other) const { return ranks_ == other.ranks_; }

 private:
  void checkWellFormed() const;
  void checkNode(int node) const;

  std::vector<int> ranks_;  // as given, index = node id
  // first_[n]: the global rank of node n's local rank 0; first_[nodes()] = worldSize(). Empty
  // when the layout is malformed.
  std::vector<int> first_;
};

}  // namespace tpnode::collectives
