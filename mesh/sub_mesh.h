// SubMesh: a view of `count` consecutive nodes of a mesh, [first, first + count), as a mesh of
// its own: node ids are shifted by `first`, so that a group over some of the nodes (the nodes
// of one pipeline stage) runs the same code as over all of them.
//
// Contract
// - The base mesh outlives the view; this node must be one of the view's nodes.
// - send/recv/isend/irecv, peerAlive and failPeer pass through with the peer shifted; tags are
//   the caller's (two views over disjoint nodes may use the same tags: they never share a link).
// - Events: the base mesh has one callback, owned by whoever made the view; that owner passes
//   every base event to deliver(), which hands those of the view's nodes (shifted) to the
//   view's callback (setEventCallback). deliver() may run on any thread.
// - linkStats() is collective over the whole base mesh, so the view refuses it
//   (Error(kUnsupported)); shutdown() does nothing (the base's owner shuts it down).
#pragma once

#include <functional>

#include "common/mutex.h"
#include "mesh/mesh.h"

namespace tpnode::mesh {

class SubMesh final : public Mesh {
 public:
  SubMesh(Mesh& base, int first, int count);

  int nodeId() const override { return base_.nodeId() - first_; }
  int nodeCount() const override { return count_; }
  void send(int peer, uint32_t tag, std::span<const std::byte> data) override;
  size_t recv(int peer, uint32_t tag, std::span<std::byte> out) override;
  std::unique_ptr<Request> isend(int peer, uint32_t tag, std::span<const std::byte> data) override;
  std::unique_ptr<Request> irecv(int peer, uint32_t tag, std::span<std::byte> out) override;
  void setEventCallback(std::function<void(const PeerEvent&)> callback) override;
  bool peerAlive(int peer) const override;
  void failPeer(int peer, const std::string& reason) override;
  std::vector<LinkStats> linkStats(int rounds) override;
  void shutdown() override {}

  // A base mesh event: passed on (shifted) when it concerns one of the view's nodes.
  void deliver(const PeerEvent& event);

 private:
  int base(int peer) const;  // Error(kInvalidArgument) for a peer outside the view

  Mesh& base_;  // outlives the view (see contract)
  const int first_, count_;
  Mutex mu_;
  std::function<void(const PeerEvent&)> callback_ TP_GUARDED_BY(mu_);
};

}  // namespace tpnode::mesh
