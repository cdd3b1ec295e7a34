// InterNode: the collectives between nodes over the mesh, for one "lane". Lane l is local
// rank l of every node: in the sliced hierarchical all-reduce every local rank exchanges its
// own slice with its peers of the same lane on the other nodes, all lanes at once.
//
// Contract
// - One InterNode per (node, lane); used by one thread at a time (the lane's rank thread). All
//   nodes call the same operations in the same order with the same sizes. The Mesh must
//   outlive the InterNode (it is owned by the node layer, which destroys collectives first).
// - Tags: op `o` of lane `l` owns kTagSlots tags, kFirstUserTag + (o * kMaxLanes + l) *
//   kTagSlots + slot, so lanes and ops never share a tag. The ring gives each receive it posts
//   ahead its own slot tag, so at most one receive is outstanding per (peer, tag) (the mesh
//   would keep several in order too: mesh/mesh.h, Ordering). With
//   sockets_per_peer > 1 the slots of a lane spread over the sockets (a tag travels on
//   tag % sockets_per_peer).
// - Buffers: every call works in place on the caller's buffer; intermediate data lives in a
//   ScratchBuffer owned by this object (grown once, never per call).
// - Summation orders (bit-identical on every node; docs/collectives.md):
//     direct: round(p_0 + p_1 + ... + p_{n-1}) in node order, f32 accumulation, one rounding.
//     tree:   node 0 receives every partial, sums exactly as direct does (the same bits) and
//             sends the sum back. Lossy wire formats use direct instead.
//     ring:   the buffer is cut in n segments (sliceRange); segment g is summed hop by hop
//             starting at node g, then g+1, ..., ending at node g-1 (mod n), rounding to the
//             dtype after each hop. Node g-1 then distributes it (ring all-gather).
//   With a lossy wire format every node, the sender included, uses the decoded value of what
//   travelled, so results stay identical on every node.
// - Failure: mesh errors propagate (Error(kPeerLost) when a peer is lost). A zero-length
//   message is the abort signal: sendAbort() sends one on every tag of the lane to every live
//   peer, and a receive that gets one throws Error(kPeerLost). So a node blocked on a live
//   peer that gave up is released too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/options.h"
#include "collectives/scratch.h"
#include "collectives/send_worker.h"
#include "mesh/mesh.h"

namespace tpnode::collectives {

inline constexpr int kMaxLanes = 64;
inline constexpr uint32_t kTagSlots = 16;

enum class InterOp : uint32_t {
  kDirect = 0,
  kRingReduceScatter = 1,
  kRingAllGather = 2,
  kGather = 3,
  kBroadcast = 4,
  kBarrier = 5,
  kSetup = 6,
  kGatherToRoot = 7,
  kTree = 8,
};
inline constexpr uint32_t kInterOpCount = 9;

inline uint32_t interTag(InterOp op, int lane, uint32_t slot = 0) {
  return mesh::kFirstUserTag +
         (static_cast<uint32_t>(op) * kMaxLanes + static_cast<uint32_t>(lane)) * kTagSlots + slot;
}

class InterNode {
 public:
  InterNode(mesh::Mesh& mesh, int lane, const CollectiveOptions& options);
  InterNode(const InterNode&) = delete;
  InterNode& operator=(const InterNode&) = delete;

  int nodeId() const { return node_; }
  int nodeCount() const { return nodes_; }

  // In place: data = sum over nodes. The algorithm is chooseInterAlgo(options, decide_bytes)
  // (decide_bytes is the same on every node: the size of the whole message, so every lane
  // chooses alike).
  void allReduceSum(void* data, size_t count, DType dtype, size_t decide_bytes);
  void allReduceDirect(void* data, size_t count, DType dtype);  // allreduce_direct.cc
  void allReduceRing(void* data, size_t count, DType dtype);    // allreduce_ring.cc
  void allReduceTree(void* data, size_t count, DType dtype);    // allreduce_tree.cc

  // out = concat over nodes of each node's `bytes` bytes of `in` (in may alias its block).
  void allGather(const void* in, void* out, size_t bytes);
  // On node `root`: out = concat over nodes of each node's `bytes` bytes of `in` (in may alias
  // its block); the other nodes only send theirs (their `out` is not touched).
  void gather(const void* in, void* out, size_t bytes, int root);
  // `bytes` of data on node `root` are copied to every node.
  void broadcast(void* data, size_t bytes, int root);
  void barrier();

  // Best effort, never throws: a zero-length message on every tag of this lane to every live
  // peer (see the contract above).
  void sendAbort() noexcept;

  // Helpers of the algorithms.
  // Throws Error(kPeerLost) for the abort signal, Error(kInvalidData) for a wrong size.
  void checkReceived(size_t got, size_t want, int peer) const;
  mesh::Mesh& mesh() { return mesh_; }
  uint32_t tag(InterOp op, uint32_t slot = 0) const { return interTag(op, lane_, slot); }
  const CollectiveOptions& options() const { return options_; }
  ScratchBuffer& scratch() { return scratch_; }
  SendWorker& sendWorker();  // created on first use (the ring's)
  // data = round(p_0 + ... + p_{n-1}) in node order (the direct order), where p_j is `data` for
  // this node and the count elements at slots + j * count * dtypeSize(dtype) for the others.
  void sumInNodeOrder(void* data, const std::byte* slots, size_t count, DType dtype) const;

 private:
  mesh::Mesh& mesh_;  // outlives this object (see contract)
  const int lane_;
  const int node_;
  const int nodes_;
  const CollectiveOptions options_;
  ScratchBuffer scratch_;
  std::unique_ptr<SendWorker> send_worker_;
  std::vector<std::unique_ptr<mesh::Request>> requests_;  // reused across calls
};

// The bytes as a span, for the mesh calls.
inline std::span<const std::byte> asBytes(const void* p, size_t n) {
  return {static_cast<const std::byte*>(p), n};
}
inline std::span<std::byte> asWritableBytes(void* p, size_t n) {
  return {static_cast<std::byte*>(p), n};
}

}  // namespace tpnode::collectives
