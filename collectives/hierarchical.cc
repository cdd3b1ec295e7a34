#include "collectives/hierarchical.h"

#include <array>

#include "collectives/small_algo_probe.h"
#include "common/byte_order.h"
#include "common/check.h"
#include "common/log.h"

namespace tpnode::collectives {
namespace {

class HierarchicalCommunicator final : public Communicator {
 public:
  HierarchicalCommunicator(std::shared_ptr<NodeGroup> group, std::unique_ptr<LocalOp> local,
                           InterNode* inter)
      : group_(std::move(group)), local_(std::move(local)), inter_(inter) {}

  int rank() const override { return topo().globalRank(local_->localRank()); }
  int size() const override { return topo().worldSize(); }

  void allReduceSum(void* data, size_t count, DType dtype) override {
    guarded([&] { allReduceImpl(data, count, dtype); });
  }
  void allGather(const void* in, void* out, size_t count, DType dtype) override {
    guarded([&] { allGatherImpl(in, out, count, dtype); });
  }
  void gather(const void* in, void* out, size_t count, DType dtype, int root) override {
    if (root < 0 || root >= size()) {
      fail(ErrorCode::kInvalidArgument, "gather root {} outside the group of {}", root, size());
    }
    guarded([&] { gatherImpl(in, out, count, dtype, root); });
  }
  void broadcast(void* data, size_t count, DType dtype, int root) override {
    // A bad argument is refused before any communication; it does not abort the group.
    if (root < 0 || root >= size()) {
      fail(ErrorCode::kInvalidArgument, "broadcast root {} outside the group of {}", root, size());
    }
    guarded([&] { broadcastImpl(data, count, dtype, root); });
  }
  void barrier() override {
    guarded([&] {
      local_->barrier();
      if (leader()) inter_->barrier();
      local_->barrier();
    });
  }

 private:
  const Topology& topo() const { return group_->topology(); }
  bool leader() const { return inter_ != nullptr && Topology::isLeader(local_->localRank()); }

  // Runs one collective; a failure aborts the whole group (local ranks and peer nodes) and
  // returns once no local rank can still read this rank's buffer.
  template <typename F>
  void guarded(F&& body) {
    local_->beginOp();
    try {
      body();
    } catch (const Error& e) {
      group_->abort(e.code(), e.what());
      local_->endOp(true);
      throw;
    } catch (...) {
      group_->abort(ErrorCode::kInternal, "unexpected exception in a collective");
      local_->endOp(true);
      throw;
    }
    local_->endOp(false);
  }

  void allReduceImpl(void* data, size_t count, DType dtype) {
    if (inter_ == nullptr) return local_->allReduceSum(data, count, dtype);
    const size_t bytes = count * dtypeSize(dtype);
    if (chooseHierMode(group_->options(), bytes) == HierMode::kLeader) {
      local_->allReduceSum(data, count, dtype);
      if (leader()) inter_->allReduceSum(data, count, dtype, bytes);
      local_->broadcast(data, count, dtype, 0);
      return;
    }
    local_->reduceScatter(data, count, dtype);
    const Range own = local_->ownSlice(count, dtype);
    inter_->allReduceSum(static_cast<std::byte*>(data) + own.begin * dtypeSize(dtype), own.size(),
                         dtype, bytes);
    local_->allGatherSlices(data, count, dtype);
  }

  // This node's block of a gathered buffer: its ranks' `count` elements each, in rank order.
  std::byte* nodeBlock(void* out, size_t count, DType dtype) const {
    return static_cast<std::byte*>(out) +
           static_cast<size_t>(topo().firstRank()) * count * dtypeSize(dtype);
  }

  void allGatherImpl(const void* in, void* out, size_t count, DType dtype) {
    const size_t es = dtypeSize(dtype);
    const size_t node_elems = static_cast<size_t>(topo().ranksPerNode()) * count;
    std::byte* node_block = nodeBlock(out, count, dtype);
    local_->allGather(in, node_block, count, dtype);
    if (inter_ == nullptr) return;
    if (leader()) inter_->allGather(node_block, out, node_elems * es);
    local_->broadcast(out, static_cast<size_t>(topo().worldSize()) * count, dtype, 0);
  }

  // Local all-gather of the node's block (shared memory), then only the leaders of the other
  // nodes send it to root's node; root's node has it on every local rank, root included.
  void gatherImpl(const void* in, void* out, size_t count, DType dtype, int root) {
    const size_t es = dtypeSize(dtype);
    const size_t node_elems = static_cast<size_t>(topo().ranksPerNode()) * count;
    const int root_node = topo().nodeOf(root);
    std::byte* node_block = nodeBlock(out, count, dtype);
    local_->allGather(in, node_block, count, dtype);
    if (inter_ == nullptr) return;
    if (!Topology::isLeader(topo().localRankOf(root))) {
      // Root is not its node's leader: the leaders exchange as in allGather, then root's node
      // shares the blocks locally.
      if (leader()) inter_->allGather(node_block, out, node_elems * es);
      local_->broadcast(out, static_cast<size_t>(topo().worldSize()) * count, dtype, 0);
      return;
    }
    if (leader()) inter_->gather(node_block, out, node_elems * es, root_node);
  }

  void broadcastImpl(void* data, size_t count, DType dtype, int root) {
    const int root_node = topo().nodeOf(root);
    const bool root_here = topo().isOnThisNode(root);
    if (root_here) local_->broadcast(data, count, dtype, topo().localRankOf(root));
    if (inter_ == nullptr) return;
    if (leader()) inter_->broadcast(data, count * dtypeSize(dtype), root_node);
    if (!root_here) local_->broadcast(data, count, dtype, 0);
  }

  const std::shared_ptr<NodeGroup> group_;
  const std::unique_ptr<LocalOp> local_;
  InterNode* const inter_;  // owned by group_ (kept alive above); null on a single node
};

}  // namespace

NodeGroup::NodeGroup(mesh::Mesh* mesh, int local_tp, const CollectiveOptions& options)
    : mesh_(mesh),
      topology_(
          Topology::uniform(mesh ? mesh->nodeCount() : 1, local_tp, mesh ? mesh->nodeId() : 0)),
      options_(options),
      local_(LocalGroup::create(local_tp, options)) {}

void NodeGroup::resolveSmallAlgo() {
  if (options_.small_algo != InterAlgo::kAuto) return;
  // Two nodes: the direct exchange is one message each way, the tree two in a row. A forced
  // algorithm never asks.
  if (nodeCount() == 2 || options_.algo != InterAlgo::kAuto) {
    options_.small_algo = InterAlgo::kDirect;
    return;
  }
  InterNode probe_lane(*mesh_, 0, options_);
  const SmallAlgoChoice choice = probeSmallAlgo(probe_lane);
  options_.small_algo = choice.algo;
  if (nodeId() == 0) {
    spdlog::info("[collectives] small all-reduce (< {} bytes, {} nodes): {} (measured: {})",
                 options_.crossover_bytes, nodeCount(), interAlgoName(choice.algo), choice.detail);
  } else {
    spdlog::debug("[collectives] small all-reduce: {} (node 0 measured)",
                  interAlgoName(choice.algo));
  }
}

std::shared_ptr<NodeGroup> NodeGroup::create(mesh::Mesh* mesh, int local_tp,
                                             const CollectiveOptions& options,
                                             std::function<void(const mesh::PeerEvent&)> forward) {
  if (local_tp < 1 || local_tp > kMaxLanes) {
    fail(ErrorCode::kInvalidArgument, "--tp {}: need 1..{} local ranks per node", local_tp,
         kMaxLanes);
  }
  auto group = std::make_shared<NodeGroup>(mesh, local_tp, options);
  if (group->topology_.singleNode()) return group;
  group->checkLayout(local_tp);
  group->resolveSmallAlgo();
  for (int l = 0; l < local_tp; ++l) {  // lane l: local rank l of every node (Topology::laneOf)
    group->lanes_.push_back(std::make_unique<InterNode>(*mesh, l, group->options_));
  }
  std::weak_ptr<NodeGroup> weak = group;
  mesh->setEventCallback([weak, forward = std::move(forward)](const mesh::PeerEvent& event) {
    // kLost only: a peer that closes in order (kClosed) has finished every collective; an
    // operation still pending on it fails with Error(kPeerLost) from the mesh and aborts then.
    if (event.kind == mesh::PeerEventKind::kLost) {
      if (auto g = weak.lock()) {
        g->abort(ErrorCode::kPeerLost,
                 fmt::format("[collectives] node {} lost: {}", event.peer, event.reason));
      }
    }
    if (forward) forward(event);
  });
  group->abort_thread_ = std::thread([raw = group.get()] { raw->abortLoop(); });
  return group;
}

NodeGroup::~NodeGroup() {
  {
    MutexLock lock(mutex_);
    stop_ = true;
  }
  wake_.notifyAll();
  if (abort_thread_.joinable()) abort_thread_.join();
}

namespace {

// What every node must agree on before any collective: the local rank count and every option
// that decides which messages an all-reduce sends. Encoded as little-endian u64 fields.
struct LayoutField {
  const char* name;  // as the user sets it
  uint64_t value;
  std::string (*show)(uint64_t);
};

std::string showNumber(uint64_t v) {
  return std::to_string(v);
}
// Received values are hostile: an enum value this build does not know is shown as a number.
std::string showAlgo(uint64_t v) {
  if (v > static_cast<uint64_t>(InterAlgo::kTree)) return "unknown value " + std::to_string(v);
  return std::string(interAlgoName(static_cast<InterAlgo>(v)));
}
std::string showHier(uint64_t v) {
  if (v > static_cast<uint64_t>(HierMode::kLeader)) return "unknown value " + std::to_string(v);
  return std::string(hierModeName(static_cast<HierMode>(v)));
}
std::string showWire(uint64_t v) {
  if (v > static_cast<uint64_t>(WireFormat::kQ8_0)) return "unknown value " + std::to_string(v);
  return std::string(wireFormatName(static_cast<WireFormat>(v)));
}

std::vector<LayoutField> layoutFields(int local_tp, const CollectiveOptions& o) {
  return {
      {"--tp", static_cast<uint64_t>(local_tp), showNumber},
      {"TPNODE_COLL_ALGO", static_cast<uint64_t>(o.algo), showAlgo},
      {"TPNODE_COLL_SMALL_ALGO", static_cast<uint64_t>(o.small_algo), showAlgo},
      {"TPNODE_COLL_CROSSOVER", o.crossover_bytes, showNumber},
      {"TPNODE_COLL_CHUNK", o.chunk_bytes, showNumber},
      {"TPNODE_COLL_HIER", static_cast<uint64_t>(o.hier), showHier},
      {"TPNODE_COLL_LEADER_MAX", o.leader_max_bytes, showNumber},
      {"TPNODE_COLL_WIRE (--wire-format)", static_cast<uint64_t>(o.wire), showWire},
  };
}

}  // namespace

void NodeGroup::checkLayout(int local_tp) {
  const uint32_t tag = interTag(InterOp::kSetup, 0);
  const std::vector<LayoutField> fields = layoutFields(local_tp, options_);
  std::vector<uint8_t> mine(fields.size() * 8);
  for (size_t f = 0; f < fields.size(); ++f) storeLE64(mine.data() + 8 * f, fields[f].value);
  const int nodes = nodeCount();
  const int node = nodeId();
  for (int j = 0; j < nodes; ++j) {
    if (j != node) mesh_->send(j, tag, asBytes(mine.data(), mine.size()));
  }
  std::vector<uint8_t> theirs(mine.size() + 1);  // one spare byte: a longer layout is wrong too
  for (int j = 0; j < nodes; ++j) {
    if (j == node) continue;
    const size_t got = mesh_->recv(j, tag, asWritableBytes(theirs.data(), theirs.size()));
    if (got != mine.size()) {
      fail(ErrorCode::kMismatch,
           "[collectives] node {} sent a {}-byte collectives layout where {} bytes were expected "
           "(is it running another tpnode version?)",
           j, got, mine.size());
    }
    for (size_t f = 0; f < fields.size(); ++f) {
      const uint64_t v = loadLE64(theirs.data() + 8 * f);
      if (v == fields[f].value) continue;
      fail(ErrorCode::kMismatch,
           "[collectives] node {} runs {} = {}, this node (node {}) {}: every node needs the "
           "same value",
           j, fields[f].name, fields[f].show(v), node, fields[f].show(fields[f].value));
    }
  }
}

std::unique_ptr<Communicator> NodeGroup::communicator(int local_rank) {
  auto local = local_->localOp(local_rank);  // validates local_rank
  InterNode* inter =
      !topology_.singleNode() ? lanes_[static_cast<size_t>(local_rank)].get() : nullptr;
  return std::make_unique<HierarchicalCommunicator>(shared_from_this(), std::move(local), inter);
}

void NodeGroup::abort(ErrorCode code, const std::string& reason) {
  if (local_->aborted()) return;
  spdlog::warn("[collectives] group aborted: {}", reason);
  local_->abort(code, reason);
  {
    MutexLock lock(mutex_);
    signal_peers_ = true;
  }
  wake_.notifyAll();
}

void NodeGroup::abortLoop() {
  MutexLock lock(mutex_);
  while (!signal_peers_ && !stop_) wake_.wait(mutex_);
  if (stop_ && !signal_peers_) return;
  lock.unlock();
  for (auto& lane : lanes_) lane->sendAbort();
}

}  // namespace tpnode::collectives
