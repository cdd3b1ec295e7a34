// Direct inter-node all-reduce: every node sends its partial to every other node and sums all
// partials in node order 0..n-1 (f32 accumulation, one rounding). One message latency; every
// node receives (n-1) x the message, so it is the small-message algorithm.
#include "collectives/inter_node.h"
#include "collectives/wire_format.h"

namespace tpnode::collectives {

void InterNode::allReduceDirect(void* data, size_t count, DType dtype) {
  if (nodes_ == 1 || count == 0) return;
  const WireCodec codec(options_.wire, dtype);
  const size_t bytes = codec.encodedBytes(count);
  const size_t send_bytes = codec.native() ? 0 : bytes;
  std::byte* base = scratch_.reserve(send_bytes + static_cast<size_t>(nodes_) * bytes);
  std::byte* send_buf = codec.native() ? static_cast<std::byte*>(data) : base;
  auto slot = [&](int j) { return base + send_bytes + static_cast<size_t>(j) * bytes; };
  if (!codec.native()) codec.encode(data, count, send_buf);

  const uint32_t tag = this->tag(InterOp::kDirect);
  requests_.clear();
  for (int j = 0; j < nodes_; ++j) {
    if (j != node_) requests_.push_back(mesh_.irecv(j, tag, {slot(j), bytes}));
  }
  for (int j = 0; j < nodes_; ++j) {
    if (j != node_) requests_.push_back(mesh_.isend(j, tag, {send_buf, bytes}));
  }
  size_t r = 0;
  for (int j = 0; j < nodes_; ++j) {
    if (j != node_) checkReceived(requests_[r++]->wait(), bytes, j);
  }
  for (; r < requests_.size(); ++r) requests_[r]->wait();  // data may be overwritten now

  if (codec.native()) return sumInNodeOrder(data, base + send_bytes, count, dtype);
  // Lossy wire: every node sums the decoded partials, its own included, in node order.
  for (int j = 0; j < nodes_; ++j) {
    const std::byte* enc = j == node_ ? send_buf : slot(j);
    if (j == 0) {
      codec.decode(enc, count, data);
    } else {
      codec.decodeAdd(enc, count, data);
    }
  }
}

}  // namespace tpnode::collectives
