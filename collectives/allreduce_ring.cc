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
// as it is reduced, kRecvAhead receives are posted ahead of the one being waited on, and up to
// kSendSlots encoded sends are in flight. From 3 nodes sends run on the lane's SendWorker
// thread, so the copy into the kernel overlaps receiving and reducing on the caller's thread;
// with 2 nodes the caller sends itself (a blocked send drains incoming frames into the posted
// receives). The measurements behind these choices are in docs/collectives.md.
// Tags: transfer t uses slot tag 2 * (t % kRecvSlots) + d, d = 0 when the sender's node id is
// below the receiver's, else 1. With sockets_per_peer = 2 (tag % 2 picks the socket) each
// socket of a pair then carries one direction: a send and a receive never contend for one
// socket's lock in the kernel. A posted all-gather receive never overlaps a pending send: it
// writes segment me - s'' while sends read me + 1 - s', equal only for s'' = s' - 1 + n.
#include <algorithm>
#include <array>

#include "collectives/inter_node.h"
#include "collectives/reduce.h"
#include "collectives/slicing.h"
#include "collectives/wire_format.h"

namespace tpnode::collectives {
namespace {

constexpr size_t kSendSlots = 4;
// Receives posted ahead: frames the peer sends ahead of us land in posted buffers instead of
// being parked (an extra copy) by the mesh. kRecvSlots slots of one chunk each.
constexpr size_t kRecvAhead = 3;
constexpr size_t kRecvSlots = kRecvAhead + 1;
static_assert(2 * kRecvSlots <= kTagSlots, "each posted receive needs its own tag per direction");
// Transfer t from node `from` to node `to` travels on the slot tag of its receive slot and
// direction (see the header comment and inter_node.h: Tags).
uint32_t slotOf(size_t t, int from, int to) {
  return static_cast<uint32_t>(2 * (t % kRecvSlots)) + (from < to ? 0u : 1u);
}
using RequestPtr = std::unique_ptr<mesh::Request>;

// Where the ring's sends go: the lane's SendWorker, or the mesh on the caller's thread.
class RingSender {
 public:
  RingSender(mesh::Mesh& mesh, SendWorker* worker) : mesh_(mesh), worker_(worker) {}
  // On any error, no queued send may still read the caller's buffer when the ring returns.
  ~RingSender() {
    if (worker_ != nullptr) worker_->drainQuietly();
  }
  RingSender(const RingSender&) = delete;
  RingSender& operator=(const RingSender&) = delete;
  // The ticket for waitFor(); inline sends are done when post() returns.
  uint64_t post(int peer, uint32_t tag, std::span<const std::byte> data) {
    if (worker_ == nullptr) {
      mesh_.send(peer, tag, data);
      return 0;
    }
    return worker_->post(peer, tag, data);
  }
  void waitFor(uint64_t ticket) {
    if (worker_ != nullptr) worker_->waitFor(ticket);
  }
  void drain() {
    if (worker_ != nullptr) worker_->drain();
  }

 private:
  mesh::Mesh& mesh_;
  SendWorker* const worker_;
};

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
  std::array<uint64_t, kSendSlots> slot_tickets{};
  RingSender sender(mesh_, n > 2 ? &sendWorker() : nullptr);

  // Reduce-scatter.
  auto rs_tag = [&](size_t t, int from, int to) {
    return tag(InterOp::kRingReduceScatter, slotOf(t, from, to));
  };
  auto post_rs_recv = [&](size_t t) {
    const Range r = piece(me - step(t) - 1, t % chunks);
    if (r.size() == 0) return;
    recvs[t % kRecvSlots] =
        mesh_.irecv(prev, rs_tag(t, prev, me), {recv_slot(t), codec.encodedBytes(r.size())});
  };
  for (size_t t = 0; t < std::min(kRecvAhead, transfers); ++t) post_rs_recv(t);
  for (size_t t = 0; t < transfers; ++t) {
    // Post receives ahead first: a send that blocks on a full socket drains incoming frames,
    // and a posted receive takes them straight into its slot instead of parking them.
    if (t + kRecvAhead < transfers) post_rs_recv(t + kRecvAhead);
    const Range out = piece(me - step(t), t % chunks);
    if (out.size() > 0) {
      if (codec.native()) {
        sender.post(next, rs_tag(t, me, next), asBytes(at(out), out.size() * es));
      } else {
        uint64_t& slot_ticket = slot_tickets[t % kSendSlots];
        sender.waitFor(slot_ticket);  // the send that used this slot is done
        codec.encode(at(out), out.size(), send_slot(t));
        slot_ticket =
            sender.post(next, rs_tag(t, me, next), {send_slot(t), codec.encodedBytes(out.size())});
      }
    }
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
  sender.drain();  // the all-gather receives overwrite what these sends read

  // All-gather.
  auto ag_tag = [&](size_t t, int from, int to) {
    return tag(InterOp::kRingAllGather, slotOf(t, from, to));
  };
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
      pending.push_back(
          mesh_.irecv(j, ag_tag(0, j, me), {block(j), codec.encodedBytes(seg(j + 1).size())}));
    }
    for (int j = 0; j < n && own.size() > 0; ++j) {
      if (j != me) mesh_.send(j, ag_tag(0, me, j), {block(me), codec.encodedBytes(own.size())});
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
    recvs[t % kRecvSlots] =
        mesh_.irecv(prev, ag_tag(t, prev, me), asWritableBytes(at(r), r.size() * es));
  };
  for (size_t t = 0; t < std::min(kRecvAhead, transfers); ++t) post_ag_recv(t);
  for (size_t t = 0; t < transfers; ++t) {
    if (t + kRecvAhead < transfers) post_ag_recv(t + kRecvAhead);
    const Range out = piece(me + 1 - step(t), t % chunks);
    if (out.size() > 0) sender.post(next, ag_tag(t, me, next), asBytes(at(out), out.size() * es));
    const Range in = piece(me - step(t), t % chunks);
    if (in.size() == 0) continue;
    RequestPtr recv = std::move(recvs[t % kRecvSlots]);
    checkReceived(recv->wait(), in.size() * es, prev);
  }
  sender.drain();
}

}  // namespace tpnode::collectives
