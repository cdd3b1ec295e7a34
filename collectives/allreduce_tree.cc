// Tree inter-node all-reduce (one level, rooted at node 0): every other node sends its partial
// to node 0, node 0 sums all partials in node order 0..n-1 exactly as the direct exchange does
// (same order, same rounding: the same bits) and sends the sum back. 2(n-1) messages instead
// of the direct exchange's n(n-1), but two message latencies instead of one.
#include "collectives/inter_node.h"

namespace tpnode::collectives {

void InterNode::allReduceTree(void* data, size_t count, DType dtype) {
  if (nodes_ == 1 || count == 0) return;
  if (options_.wire != WireFormat::kNative && dtype == DType::kF32) {
    return allReduceDirect(data, count, dtype);  // lossy formats: see the contract
  }
  constexpr int kRoot = 0;
  const size_t bytes = count * dtypeSize(dtype);
  const uint32_t up = tag(InterOp::kTree, 0);
  const uint32_t down = tag(InterOp::kTree, 1);
  if (node_ != kRoot) {
    // The receive of the sum is posted only once our partial has left `data`: the root answers
    // after it has all of it, but that order passes through the kernel, where ThreadSanitizer
    // (and the memory model) cannot see it. An early answer waits in the mesh's parked frames.
    mesh_.send(kRoot, up, asBytes(data, bytes));
    checkReceived(mesh_.irecv(kRoot, down, asWritableBytes(data, bytes))->wait(), bytes, kRoot);
    return;
  }
  std::byte* base = scratch_.reserve(static_cast<size_t>(nodes_) * bytes);
  auto slot = [&](int j) { return base + static_cast<size_t>(j) * bytes; };
  requests_.clear();
  for (int j = 0; j < nodes_; ++j) {
    if (j != node_) requests_.push_back(mesh_.irecv(j, up, {slot(j), bytes}));
  }
  size_t r = 0;
  for (int j = 0; j < nodes_; ++j) {
    if (j != node_) checkReceived(requests_[r++]->wait(), bytes, j);
  }
  sumInNodeOrder(data, base, count, dtype);
  requests_.clear();
  for (int j = 0; j < nodes_; ++j) {
    if (j != node_) requests_.push_back(mesh_.isend(j, down, asBytes(data, bytes)));
  }
  for (auto& request : requests_) request->wait();
}

}  // namespace tpnode::collectives
