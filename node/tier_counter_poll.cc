#include "node/tier_counter_poll.h"

#include <spdlog/spdlog.h>

#include "common/error.h"
#include "node/mesh_setup.h"

namespace tpnode::node {

TierCounterPoll::TierCounterPoll(mesh::Mesh& mesh, RanksOf ranks_of,
                                 std::chrono::milliseconds interval)
    : mesh_(mesh), ranks_of_(std::move(ranks_of)), interval_(interval) {
  peers_.reserve(static_cast<size_t>(mesh.nodeCount()));
  for (int p = 1; p < mesh.nodeCount(); ++p) {
    Peer& peer = peers_.emplace_back();
    peer.node = p;
    peer.buffer.resize(kMaxTierReportBytes);
    try {
      peer.reply = mesh_.irecv(p, kTagTierReport, peer.buffer);
    } catch (const Error&) {
      peer.reply.reset();  // lost already: the mesh reports why
    }
  }
}

TierCounterPoll::~TierCounterPoll() = default;  // the Requests cancel their receives

void TierCounterPoll::take(Peer& peer, std::vector<TierReport>& out) {
  try {
    if (!peer.reply->test()) return;
    const size_t n = peer.reply->wait();
    peer.reply = mesh_.irecv(peer.node, kTagTierReport, peer.buffer);
    TierReport r;
    try {
      r = decodeTierReport(std::span(peer.buffer.data(), n));
      const auto [first, count] = ranks_of_(peer.node);
      if (r.node != static_cast<uint32_t>(peer.node)) {
        fail(ErrorCode::kInvalidData, "it names node {}", r.node);
      }
      for (const RankTierCounters& rc : r.ranks) {
        if (rc.rank < first || rc.rank - first >= count) {
          fail(ErrorCode::kInvalidData, "rank {} is not one of its ranks", rc.rank);
        }
      }
    } catch (const Error& e) {
      if (auto held = log_.pass()) {
        spdlog::warn("[driver] a KV tier counter report from node {} was dropped: {}{}", peer.node,
                     e.what(), heldBackNote(*held));
      }
      return;
    }
    out.push_back(std::move(r));
  } catch (const Error&) {
    peer.reply.reset();  // the link failed: the mesh reports why
  }
}

std::vector<TierReport> TierCounterPoll::poll() {
  std::vector<TierReport> out;
  for (Peer& peer : peers_) {
    if (peer.reply) take(peer, out);
  }
  const auto now = std::chrono::steady_clock::now();
  if (now < next_query_) return out;
  next_query_ = now + interval_;
  ++probe_;
  for (const Peer& peer : peers_) {
    if (!peer.reply || !mesh_.peerAlive(peer.node)) continue;
    try {
      mesh_.send(peer.node, kTagProgress,
                 encodeProgressQuery(
                     {ProgressKind::kTierCounters, probe_, static_cast<uint32_t>(peer.node)}));
    } catch (const Error&) {
      // Lost meanwhile: the mesh reports why; its receive fails at the next poll.
    }
  }
  return out;
}

}  // namespace tpnode::node
