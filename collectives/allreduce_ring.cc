// Ring inter-node all-reduce: reduce-scatter then all-gather around the ring
// node -> node+1, chunked and pipelined. Each node sends and receives 2(n-1)/n of the message,
// the bandwidth optimum, so it is the large-message algorithm.
//
// Schedule (n nodes, segments g = sliceRange(count, n, g), each cut into chunks):
//   reduce-scatter step s = 0..n-2: send segment (me - s), receive segment (me - s - 1) from
//     me - 1 and add it into the local data. Segment g is thus summed starting at node g and
//     ending at node g - 1, which owns the total.
//   all-gather step s = 0..n-2: send segment (me + 1 - s), receive segment (me - s) straight
//     into the buffer. With a lossy wire format the owner instead sends its encoded segment to
//     every node once (same bytes per node), and every node, the owner included, keeps the
//     decoded value, so that all nodes hold the same bits.
// Pipelining: transfers run chunk by chunk in (step, chunk) order; a chunk is forwarded as soon
// as it is reduced, the next receive is posted before the current one is waited on, and up to
// kSendSlots sends are in flight.
#include <algorithm>
#include <array>

#include "collectives/inter_node.h"
#include "collectives/reduce.h"
#include "collectives/slicing.h"
#include "collectives/wire_format.h"

namespace tpnode::collectives {
namespace {

constexpr size_t kSendSlots = 4;
constexpr size_t kRecvSlots = 2;
using RequestPtr = std::unique_ptr<mesh::Request>;

// Waits every request in `slots` and clears them.
template <size_t N>
void drain(std::array<RequestPtr, N>& slots) {
  for (auto& r : slots) {
    if (r) r->wait();
    r.reset();
  }
}

}  // namespace

void InterNode::allReduceRing(void* data, size_t count, DType dtype) {
  if (nodes_ == 1 || count == 0) return;
  const WireCodec codec(options_.wire, dtype);
  const size_t es = dtypeSize(dtype);
  const size_t chunk = std::max(options_.chunk_bytes / es, kQ8Block) / kQ8Block * kQ8Block;
  const int n = nodes_;
  const int me = node_;
  const int next = (me + 1) % n;
  const int prev = (me + n - 1) % n;
  auto seg = [&](long g) { return sliceRange(count, n, static_cast<int>(((g % n) + n) % n)); };
  const size_t chunks = (seg(0).size() + chunk - 1) / chunk;  // segment 0 is the largest
  auto piece = [&](long g, size_t k) {
    const Range s = seg(g);
    const size_t b = std::min(s.end, s.begin + k * chunk);
    return Range{b, std::min(s.end, b + chunk)};
  };
  const size_t slot_bytes = codec.encodedBytes(chunk);
  const size_t seg_bytes = codec.encodedBytes(seg(0).size());
  std::byte* base = scratch_.reserve((kRecvSlots + kSendSlots) * slot_bytes +
                                     (codec.native() ? 0 : static_cast<size_t>(n) * seg_bytes));
  auto recv_slot = [&](size_t t) { return base + (t % kRecvSlots) * slot_bytes; };
  auto send_slot = [&](size_t t) { return base + (kRecvSlots + t % kSendSlots) * slot_bytes; };
  auto* bytes = static_cast<std::byte*>(data);
  auto at = [&](const Range& r) { return bytes + r.begin * es; };
  const size_t transfers = static_cast<size_t>(n - 1) * chunks;
  auto step = [&](size_t t) { return static_cast<long>(t / chunks); };
  std::array<RequestPtr, kRecvSlots> recvs;
  std::array<RequestPtr, kSendSlots> sends;

  // Reduce-scatter.
  const uint32_t rs_tag = tag(InterOp::kRingReduceScatter);
  auto post_rs_recv = [&](size_t t) {
    const Range r = piece(me - step(t) - 1, t % chunks);
    if (r.size() == 0) return;
    recvs[t % kRecvSlots] = mesh_.irecv(prev, rs_tag, {recv_slot(t), codec.encodedBytes(r.size())});
  };
  post_rs_recv(0);
  for (size_t t = 0; t < transfers; ++t) {
    const Range out = piece(me - step(t), t % chunks);
    RequestPtr& send = sends[t % kSendSlots];
    if (send) send->wait();
    send.reset();
    if (out.size() > 0) {
      if (codec.native()) {
        send = mesh_.isend(next, rs_tag, asBytes(at(out), out.size() * es));
      } else {
        codec.encode(at(out), out.size(), send_slot(t));
        send = mesh_.isend(next, rs_tag, {send_slot(t), codec.encodedBytes(out.size())});
      }
    }
    if (t + 1 < transfers) post_rs_recv(t + 1);
    const Range in = piece(me - step(t) - 1, t % chunks);
    if (in.size() == 0) continue;
    RequestPtr recv = std::move(recvs[t % kRecvSlots]);
    checkReceived(recv->wait(), codec.encodedBytes(in.size()), prev);
    if (codec.native()) {
      addInto(at(in), recv_slot(t), in.size(), dtype);
    } else {
      codec.decodeAdd(recv_slot(t), in.size(), at(in));
    }
  }
  drain(sends);

  // All-gather.
  const uint32_t ag_tag = tag(InterOp::kRingAllGather);
  if (!codec.native()) {
    std::byte* enc = base + (kRecvSlots + kSendSlots) * slot_bytes;
    auto block = [&](int j) { return enc + static_cast<size_t>(j) * seg_bytes; };
    const Range own = seg(me + 1);
    codec.encode(at(own), own.size(), block(me));
    codec.decode(block(me), own.size(), at(own));
    std::vector<RequestPtr>& pending = requests_;
    pending.clear();
    for (int j = 0; j < n; ++j) {
      if (j == me || seg(j + 1).size() == 0) continue;
      pending.push_back(mesh_.irecv(j, ag_tag, {block(j), codec.encodedBytes(seg(j + 1).size())}));
    }
    for (int j = 0; j < n && own.size() > 0; ++j) {
      if (j != me) mesh_.send(j, ag_tag, {block(me), codec.encodedBytes(own.size())});
    }
    size_t r = 0;
    for (int j = 0; j < n; ++j) {
      const Range theirs = seg(j + 1);
      if (j == me || theirs.size() == 0) continue;
      checkReceived(pending[r++]->wait(), codec.encodedBytes(theirs.size()), j);
      codec.decode(block(j), theirs.size(), at(theirs));
    }
    return;
  }
  auto post_ag_recv = [&](size_t t) {
    const Range r = piece(me - step(t), t % chunks);
    if (r.size() == 0) return;
    recvs[t % kRecvSlots] = mesh_.irecv(prev, ag_tag, asWritableBytes(at(r), r.size() * es));
  };
  post_ag_recv(0);
  for (size_t t = 0; t < transfers; ++t) {
    const Range out = piece(me + 1 - step(t), t % chunks);
    RequestPtr& send = sends[t % kSendSlots];
    if (send) send->wait();
    send.reset();
    if (out.size() > 0) send = mesh_.isend(next, ag_tag, asBytes(at(out), out.size() * es));
    if (t + 1 < transfers) post_ag_recv(t + 1);
    const Range in = piece(me - step(t), t % chunks);
    if (in.size() == 0) continue;
    RequestPtr recv = std::move(recvs[t % kRecvSlots]);
    checkReceived(recv->wait(), in.size() * es, prev);
  }
  drain(sends);
}

}  // namespace tpnode::collectives
