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

  int rank() const override { return group_->nodeId() * local_->localSize() + local_->localRank(); }
  int size() const override { return group_->nodeCount() * local_->localSize(); }

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
  bool leader() const { return inter_ != nullptr && local_->localRank() == 0; }

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

  void allGatherImpl(const void* in, void* out, size_t count, DType dtype) {
    const size_t es = dtypeSize(dtype);
    const size_t node_elems = static_cast<size_t>(local_->localSize()) * count;
    auto* node_block = static_cast<std::byte*>(out) + group_->nodeId() * node_elems * es;
    local_->allGather(in, node_block, count, dtype);
    if (inter_ == nullptr) return;
    if (leader()) inter_->allGather(node_block, out, node_elems * es);
    local_->broadcast(out, node_elems * group_->nodeCount(), dtype, 0);
  }

  // Local all-gather of the node's block (shared memory), then only the leaders of the other
  // nodes send it to root's node; root's node has it on every local rank, root included.
  void gatherImpl(const void* in, void* out, size_t count, DType dtype, int root) {
    const size_t es = dtypeSize(dtype);
    const size_t node_elems = static_cast<size_t>(local_->localSize()) * count;
    const int root_node = root / local_->localSize();
    auto* node_block = static_cast<std::byte*>(out) + group_->nodeId() * node_elems * es;
    local_->allGather(in, node_block, count, dtype);
    if (inter_ == nullptr) return;
    if (root % local_->localSize() != 0) {
      // Root is not its node's leader: the leaders exchange as in allGather, then root's node
      // shares the blocks locally.
      if (leader()) inter_->allGather(node_block, out, node_elems * es);
      local_->broadcast(out, node_elems * group_->nodeCount(), dtype, 0);
      return;
    }
    if (leader()) inter_->gather(node_block, out, node_elems * es, root_node);
  }

  void broadcastImpl(void* data, size_t count, DType dtype, int root) {
    const int root_node = root / local_->localSize();
    const int root_local = root % local_->localSize();
    if (group_->nodeId() == root_node) local_->broadcast(data, count, dtype, root_local);
    if (inter_ == nullptr) return;
    if (leader()) inter_->broadcast(data, count * dtypeSize(dtype), root_node);
    if (group_->nodeId() != root_node) local_->broadcast(data, count, dtype, 0);
  }

  const std::shared_ptr<NodeGroup> group_;
  const std::unique_ptr<LocalOp> local_;
  InterNode* const inter_;  // owned by group_ (kept alive above); null on a single node
};

}  // namespace

NodeGroup::NodeGroup(mesh::Mesh* mesh, int local_tp, const CollectiveOptions& options)
    : mesh_(mesh),
      node_(mesh ? mesh->nodeId() : 0),
      nodes_(mesh ? mesh->nodeCount() : 1),
      options_(options),
      local_(LocalGroup::create(local_tp, options)) {}

void NodeGroup::resolveSmallAlgo() {
  if (options_.small_algo != InterAlgo::kAuto) return;
  // Two nodes: the direct exchange is one message each way, the tree two in a row. A forced
  // algorithm never asks.
  if (nodes_ == 2 || options_.algo != InterAlgo::kAuto) {
    options_.small_algo = InterAlgo::kDirect;
    return;
  }
  InterNode probe_lane(*mesh_, 0, options_);
  const SmallAlgoChoice choice = probeSmallAlgo(probe_lane);
  options_.small_algo = choice.algo;
  if (node_ == 0) {
    spdlog::info("[collectives] small all-reduce (< {} bytes, {} nodes): {} (measured: {})",
                 options_.crossover_bytes, nodes_, interAlgoName(choice.algo), choice.detail);
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
  if (group->nodes_ == 1) return group;
  group->checkLayout(local_tp);
  group->resolveSmallAlgo();
  for (int l = 0; l < local_tp; ++l) {
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
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (abort_thread_.joinable()) abort_thread_.join();
}

void NodeGroup::checkLayout(int local_tp) {
  const uint32_t tag = interTag(InterOp::kSetup, 0);
  std::array<uint8_t, 4> mine{};
  storeLE32(mine.data(), static_cast<uint32_t>(local_tp));
  for (int j = 0; j < nodes_; ++j) {
    if (j != node_) mesh_->send(j, tag, asBytes(mine.data(), mine.size()));
  }
  for (int j = 0; j < nodes_; ++j) {
    if (j == node_) continue;
    std::array<uint8_t, 4> theirs{};
    const size_t got = mesh_->recv(j, tag, asWritableBytes(theirs.data(), theirs.size()));
    if (got != theirs.size()) {
      fail(ErrorCode::kInvalidData, "[collectives] node {} sent a {}-byte layout", j, got);
    }
    if (loadLE32(theirs.data()) != static_cast<uint32_t>(local_tp)) {
      fail(ErrorCode::kMismatch, "[collectives] node {} runs --tp {}, this node (node {}) --tp {}",
           j, loadLE32(theirs.data()), node_, local_tp);
    }
  }
}

std::unique_ptr<Communicator> NodeGroup::communicator(int local_rank) {
  auto local = local_->localOp(local_rank);  // validates local_rank
  InterNode* inter = nodes_ > 1 ? lanes_[static_cast<size_t>(local_rank)].get() : nullptr;
  return std::make_unique<HierarchicalCommunicator>(shared_from_this(), std::move(local), inter);
}

void NodeGroup::abort(ErrorCode code, const std::string& reason) {
  if (local_->aborted()) return;
  spdlog::warn("[collectives] group aborted: {}", reason);
  local_->abort(code, reason);
  {
    std::lock_guard lock(mutex_);
    signal_peers_ = true;
  }
  wake_.notify_all();
}

void NodeGroup::abortLoop() {
  std::unique_lock lock(mutex_);
  wake_.wait(lock, [&] { return signal_peers_ || stop_; });
  if (stop_ && !signal_peers_) return;
  lock.unlock();
  for (auto& lane : lanes_) lane->sendAbort();
}

}  // namespace tpnode::collectives
