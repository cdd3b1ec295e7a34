#include "mesh/sub_mesh.h"

#include "common/error.h"

namespace tpnode::mesh {

SubMesh::SubMesh(Mesh& base, int first, int count) : base_(base), first_(first), count_(count) {
  if (first < 0 || count < 1 || first + count > base.nodeCount() || base.nodeId() < first ||
      base.nodeId() >= first + count) {
    fail(ErrorCode::kInvalidArgument,
         "a view of nodes {}..{} of a {}-node mesh must hold this node ({})", first,
         first + count - 1, base.nodeCount(), base.nodeId());
  }
}

int SubMesh::base(int peer) const {
  if (peer < 0 || peer >= count_) {
    fail(ErrorCode::kInvalidArgument, "peer {} outside a view of {} nodes", peer, count_);
  }
  return first_ + peer;
}

void SubMesh::send(int peer, uint32_t tag, std::span<const std::byte> data) {
  base_.send(base(peer), tag, data);
}

size_t SubMesh::recv(int peer, uint32_t tag, std::span<std::byte> out) {
  return base_.recv(base(peer), tag, out);
}

std::unique_ptr<Request> SubMesh::isend(int peer, uint32_t tag, std::span<const std::byte> data) {
  return base_.isend(base(peer), tag, data);
}

std::unique_ptr<Request> SubMesh::irecv(int peer, uint32_t tag, std::span<std::byte> out) {
  return base_.irecv(base(peer), tag, out);
}

void SubMesh::setEventCallback(std::function<void(const PeerEvent&)> callback) {
  MutexLock lock(mu_);
  callback_ = std::move(callback);
}

bool SubMesh::peerAlive(int peer) const {
  return base_.peerAlive(base(peer));
}

void SubMesh::failPeer(int peer, const std::string& reason) {
  base_.failPeer(base(peer), reason);
}

std::vector<LinkStats> SubMesh::linkStats(int) {
  fail(ErrorCode::kUnsupported, "linkStats() is collective over the whole mesh, not a view");
}

void SubMesh::deliver(const PeerEvent& event) {
  if (event.peer < first_ || event.peer >= first_ + count_) return;
  std::function<void(const PeerEvent&)> callback;
  {
    MutexLock lock(mu_);
    callback = callback_;
  }
  if (callback) callback(PeerEvent{event.kind, event.peer - first_, event.reason});
}

}  // namespace tpnode::mesh
