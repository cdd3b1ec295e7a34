#include "collectives/topology.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"

namespace tpnode::collectives {

Topology::Topology(Layout layout, int node_id, std::vector<int> devices)
    : layout_(std::move(layout)), node_id_(node_id), devices_(std::move(devices)) {
  if (const auto refusal = layout_.refusal("--tp-layout"))
    throw Error(refusal->code, refusal->message);
  ranks_per_node_ = layout_.ranksOf(0);
  world_size_ = layout_.worldSize();
  if (node_id_ < 0 || node_id_ >= nodes()) {
    fail(ErrorCode::kInvalidArgument, "node id {} is not a node of a {}-node topology (0..{})",
         node_id_, nodes(), nodes() - 1);
  }
  if (!devices_.empty() && static_cast<int>(devices_.size()) != ranks_per_node_) {
    fail(ErrorCode::kInvalidArgument,
         "device list {} names {} device(s) for {} local rank(s); give one per local rank",
         fmt::join(devices_, ","), devices_.size(), ranks_per_node_);
  }
  for (int d : devices_) {
    if (d < 0) {
      fail(ErrorCode::kInvalidArgument, "device list {}: device {} is negative",
           fmt::join(devices_, ","), d);
    }
  }
}

Topology Topology::uniform(int nodes, int ranks_per_node, int node_id, std::vector<int> devices) {
  if (nodes < 1 || nodes > kMaxNodes) {
    fail(ErrorCode::kInvalidArgument, "topology of {} nodes: need 1..{}", nodes, kMaxNodes);
  }
  if (ranks_per_node < 1 || ranks_per_node > kMaxRanksPerNode) {
    fail(ErrorCode::kInvalidArgument, "topology of {} ranks per node: need 1..{}", ranks_per_node,
         kMaxRanksPerNode);
  }
  return Topology(Layout::uniform(nodes, ranks_per_node), node_id, std::move(devices));
}

Topology Topology::fromLayout(const Layout& layout, int node_id, std::vector<int> devices) {
  return Topology(layout, node_id, std::move(devices));
}

Topology Topology::fromLayout(std::span<const int> ranks_per_node, int node_id,
                              std::vector<int> devices) {
  return fromLayout(Layout(std::vector<int>(ranks_per_node.begin(), ranks_per_node.end())), node_id,
                    std::move(devices));
}

void Topology::checkLocal(int local) const {
  if (local < 0 || local >= ranks_per_node_) {
    fail(ErrorCode::kInvalidArgument, "local rank {} outside a node of {} rank(s)", local,
         ranks_per_node_);
  }
}

void Topology::checkGlobal(int global) const {
  if (global < 0 || global >= worldSize()) {
    fail(ErrorCode::kInvalidArgument, "global rank {} outside a group of {}", global, worldSize());
  }
}

int Topology::globalRank(int node, int local) const {
  return layout_.globalRank(node, local);
}

int Topology::nodeOf(int global) const {
  return layout_.nodeOf(global);
}

int Topology::localRankOf(int global) const {
  return layout_.localRankOf(global);
}

int Topology::stageOf(int global) const {
  checkGlobal(global);
  return global / tpSize();
}

int Topology::tpRank(int global) const {
  checkGlobal(global);
  return global % tpSize();
}

std::string Topology::stageRefusal(int nodes, int stages) {
  if (stages < 1) return fmt::format("{} pipeline stages: need at least 1", stages);
  if (stages > nodes) {
    return fmt::format("{} pipeline stages on {} node{}: a stage needs at least one node", stages,
                       nodes, nodes == 1 ? "" : "s");
  }
  if (nodes % stages != 0) {
    return fmt::format(
        "{} pipeline stages on {} nodes: every stage needs the same number of nodes (nodes = "
        "stages x nodes per stage)",
        stages, nodes);
  }
  return "";
}

Topology Topology::withStages(int stages) const {
  if (std::string why = stageRefusal(nodes(), stages); !why.empty()) {
    throw Error(ErrorCode::kInvalidArgument, why);
  }
  Topology t = *this;
  t.stages_ = stages;
  return t;
}

int Topology::stageOfNode(int node) const {
  if (node < 0 || node >= nodes()) {
    fail(ErrorCode::kInvalidArgument, "node {} outside a {}-node topology", node, nodes());
  }
  return node / nodesPerStage();
}

int Topology::firstNodeOf(int stage) const {
  if (stage < 0 || stage >= stages_) {
    fail(ErrorCode::kInvalidArgument, "stage {} outside a {}-stage pipeline", stage, stages_);
  }
  return stage * nodesPerStage();
}

int Topology::firstRankOf(int stage) const {
  return firstNodeOf(stage) * ranks_per_node_;
}

int Topology::device(int local) const {
  checkLocal(local);
  if (devices_.empty()) {
    fail(ErrorCode::kInvalidArgument, "local rank {} has no device: no device list was given",
         local);
  }
  return devices_[static_cast<size_t>(local)];
}

std::vector<int> Topology::roundRobinDevices(int ranks_per_node, int available) {
  if (available < 1 || ranks_per_node < 0) {
    fail(ErrorCode::kInvalidArgument,
         "{} local rank(s) on {} device(s): need a device and a rank count >= 0", ranks_per_node,
         available);
  }
  std::vector<int> devices(static_cast<size_t>(ranks_per_node));
  for (int r = 0; r < ranks_per_node; ++r) devices[static_cast<size_t>(r)] = r % available;
  return devices;
}

std::string Topology::describe() const {
  std::string s =
      fmt::format("{} node{} x {} rank{} ({} ranks; node {}: global ranks {}..{})", nodes(),
                  nodes() == 1 ? "" : "s", ranks_per_node_, ranks_per_node_ == 1 ? "" : "s",
                  worldSize(), node_id_, firstRank(), firstRank() + ranks_per_node_ - 1);
  if (stages_ > 1) {
    s += fmt::format(", {} pipeline stages of {} node{} (node {}: stage {})", stages_,
                     nodesPerStage(), nodesPerStage() == 1 ? "" : "s", node_id_, stage());
  }
  return s;
}

}  // namespace tpnode::collectives
