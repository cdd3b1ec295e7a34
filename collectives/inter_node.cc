#include "collectives/inter_node.h"

#include <array>
#include <cstring>

#include "collectives/reduce.h"
#include "common/check.h"
#include "common/log.h"
#include "mesh/tags.h"

namespace tpnode::collectives {

// interTag() (inter_node.h) numbers from kFirstUserTag: every (op, lane, slot) must stay inside
// the collectives' range of mesh/tags.h.
static_assert(mesh::kCollectiveTags.first == mesh::kFirstUserTag,
              "the collectives' tags start at the first user tag (mesh/tags.h)");
static_assert(kInterOpCount * kMaxLanes * kTagSlots <= mesh::kCollectiveTags.count,
              "the collectives' tags outgrow their range in mesh/tags.h");

InterNode::InterNode(mesh::Mesh& mesh, int lane, const CollectiveOptions& options)
    : mesh_(mesh), lane_(lane), node_(mesh.nodeId()), nodes_(mesh.nodeCount()), options_(options) {
  if (lane < 0 || lane >= kMaxLanes) {
    fail(ErrorCode::kInvalidArgument, "local rank {} : at most {} local ranks per node", lane,
         kMaxLanes);
  }
  requests_.reserve(static_cast<size_t>(2 * nodes_));
}

SendWorker& InterNode::sendWorker() {
  if (!send_worker_) send_worker_ = std::make_unique<SendWorker>(mesh_);
  return *send_worker_;
}

void InterNode::sumInNodeOrder(void* data, const std::byte* slots, size_t count,
                               DType dtype) const {
  constexpr int kMaxNodes = 256;
  TP_CHECK(nodes_ <= kMaxNodes, "{} nodes", nodes_);
  std::array<const void*, kMaxNodes> srcs{};
  const size_t bytes = count * dtypeSize(dtype);
  for (int j = 0; j < nodes_; ++j) {
    srcs[static_cast<size_t>(j)] = j == node_ ? data : slots + static_cast<size_t>(j) * bytes;
  }
  reduceSum(data, std::span(srcs.data(), static_cast<size_t>(nodes_)), count, dtype);
}

void InterNode::checkReceived(size_t got, size_t want, int peer) const {
  if (got == want) return;
  if (got == 0) {
    fail(ErrorCode::kPeerLost, "[collectives] node {} aborted the collective (a peer was lost)",
         peer);
  }
  fail(ErrorCode::kInvalidData, "[collectives] node {} sent {} bytes where {} were expected", peer,
       got, want);
}

void InterNode::allReduceSum(void* data, size_t count, DType dtype, size_t decide_bytes) {
  if (nodes_ == 1 || count == 0) return;
  switch (chooseInterAlgo(options_, decide_bytes)) {
    case InterAlgo::kDirect:
      return allReduceDirect(data, count, dtype);
    case InterAlgo::kTree:
      return allReduceTree(data, count, dtype);
    default:
      return allReduceRing(data, count, dtype);
  }
}

void InterNode::allGather(const void* in, void* out, size_t bytes) {
  auto* blocks = static_cast<std::byte*>(out);
  std::byte* own = blocks + static_cast<size_t>(node_) * bytes;
  if (own != in && bytes > 0) std::memcpy(own, in, bytes);
  if (nodes_ == 1 || bytes == 0) return;
  const uint32_t tag = this->tag(InterOp::kGather);
  requests_.clear();
  for (int j = 0; j < nodes_; ++j) {
    if (j == node_) continue;
    requests_.push_back(
        mesh_.irecv(j, tag, asWritableBytes(blocks + static_cast<size_t>(j) * bytes, bytes)));
  }
  for (int j = 0; j < nodes_; ++j) {
    if (j != node_) mesh_.send(j, tag, asBytes(own, bytes));
  }
  size_t r = 0;
  for (int j = 0; j < nodes_; ++j) {
    if (j != node_) checkReceived(requests_[r++]->wait(), bytes, j);
  }
}

void InterNode::gather(const void* in, void* out, size_t bytes, int root) {
  if (bytes == 0) return;
  const uint32_t tag = this->tag(InterOp::kGatherToRoot);
  if (node_ != root) {
    mesh_.send(root, tag, asBytes(in, bytes));
    return;
  }
  auto* blocks = static_cast<std::byte*>(out);
  std::byte* own = blocks + static_cast<size_t>(node_) * bytes;
  if (own != in) std::memcpy(own, in, bytes);
  requests_.clear();
  for (int j = 0; j < nodes_; ++j) {
    if (j == node_) continue;
    requests_.push_back(
        mesh_.irecv(j, tag, asWritableBytes(blocks + static_cast<size_t>(j) * bytes, bytes)));
  }
  size_t r = 0;
  for (int j = 0; j < nodes_; ++j) {
    if (j != node_) checkReceived(requests_[r++]->wait(), bytes, j);
  }
}

void InterNode::broadcast(void* data, size_t bytes, int root) {
  if (nodes_ == 1 || bytes == 0) return;
  const uint32_t tag = this->tag(InterOp::kBroadcast);
  if (node_ == root) {
    requests_.clear();
    for (int j = 0; j < nodes_; ++j) {
      if (j != node_) requests_.push_back(mesh_.isend(j, tag, asBytes(data, bytes)));
    }
    for (auto& request : requests_) request->wait();
    return;
  }
  checkReceived(mesh_.recv(root, tag, asWritableBytes(data, bytes)), bytes, root);
}

void InterNode::barrier() {
  if (nodes_ == 1) return;
  const uint32_t tag = this->tag(InterOp::kBarrier);
  const std::byte token{1};
  for (int j = 0; j < nodes_; ++j) {
    if (j != node_) mesh_.send(j, tag, {&token, 1});
  }
  for (int j = 0; j < nodes_; ++j) {
    if (j == node_) continue;
    std::byte got{0};
    checkReceived(mesh_.recv(j, tag, {&got, 1}), 1, j);
  }
}

void InterNode::sendAbort() noexcept {
  for (int j = 0; j < nodes_; ++j) {
    if (j == node_) continue;
    try {
      for (uint32_t op = 0; op < kInterOpCount && mesh_.peerAlive(j); ++op) {
        for (uint32_t slot = 0; slot < kTagSlots; ++slot) {
          mesh_.send(j, interTag(static_cast<InterOp>(op), lane_, slot), {});
        }
      }
    } catch (const std::exception& e) {
      spdlog::debug("[collectives] abort signal to node {} not sent: {}", j, e.what());
    }
  }
}

}  // namespace tpnode::collectives
