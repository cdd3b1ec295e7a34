#include "node/stall_probe.h"

#include <algorithm>
#include <array>
#include <thread>

#include <fmt/format.h>
#include "common/error.h"
#include "node/mesh_setup.h"
#include "node/step_progress.h"

namespace tpnode::node {
namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(10);

// One probed worker. Not movable: the pending receive writes into `buffer`.
struct Ask {
  explicit Ask(int p) : peer(p) {}
  Ask(const Ask&) = delete;
  Ask& operator=(const Ask&) = delete;

  const int peer;
  std::array<std::byte, kProgressReportBytes> buffer{};
  std::unique_ptr<mesh::Request> reply;  // null once answered or failed
  bool answered = false;
  ProgressReport report;
  std::string error;  // why probing it failed
};

// Polls `ask`'s reply once; a report of an earlier probe is skipped (a new receive is posted).
void pollReply(mesh::Mesh& mesh, Ask& ask, uint32_t probe) {
  try {
    if (!ask.reply->test()) return;
    const size_t n = ask.reply->wait();
    ProgressReport r = decodeProgressReport(std::span(ask.buffer.data(), n));
    if (r.probe != probe) {
      ask.reply = mesh.irecv(ask.peer, kTagProgressReport, ask.buffer);
      return;
    }
    if (r.node != static_cast<uint32_t>(ask.peer)) {
      fail(ErrorCode::kInvalidData, "a progress report from node {} names node {}", ask.peer,
           r.node);
    }
    ask.report = r;
    ask.answered = true;
  } catch (const Error& e) {
    ask.error = e.what();
  }
  ask.reply.reset();
}

}  // namespace

std::vector<uint64_t> CommandLedger::snapshot() const {
  std::vector<uint64_t> out(static_cast<size_t>(nodes_));
  for (size_t p = 0; p < out.size(); ++p) out[p] = sent_[p].load();
  return out;
}

void CommandLedger::awaitAll() {
  for (size_t p = 0; p < static_cast<size_t>(nodes_); ++p) awaited_[p].store(kAll);
}

void CommandLedger::awaitUpTo(std::span<const uint64_t> counts) {
  for (size_t p = 0; p < static_cast<size_t>(nodes_); ++p) {
    awaited_[p].store(p < counts.size() ? counts[p] : kAll);
  }
}

uint64_t CommandLedger::awaited(int peer) const {
  return std::min(awaited_[static_cast<size_t>(peer)].load(), sent(peer));
}

std::vector<StalledPeer> findStalledPeers(mesh::Mesh& mesh, const CommandLedger& ledger,
                                          uint32_t probe, std::chrono::milliseconds window) {
  std::vector<std::unique_ptr<Ask>> asks;
  for (int p = 1; p < mesh.nodeCount(); ++p) {
    if (!mesh.peerAlive(p)) continue;
    auto& ask = *asks.emplace_back(std::make_unique<Ask>(p));
    try {
      ask.reply = mesh.irecv(p, kTagProgressReport, ask.buffer);  // posted before the query
      mesh.send(p, kTagProgress,
                encodeProgressQuery({ProgressKind::kProbe, probe, static_cast<uint32_t>(p)}));
    } catch (const Error& e) {
      ask.error = e.what();
      ask.reply.reset();
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + window;
  for (;;) {
    bool pending = false;
    for (auto& ask : asks) {
      if (ask->reply) pollReply(mesh, *ask, probe);
      pending = pending || ask->reply != nullptr;
    }
    if (!pending || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(kPollInterval);
  }
  std::vector<StalledPeer> stalled;
  for (auto& ask : asks) {
    if (!mesh.peerAlive(ask->peer)) continue;  // lost meanwhile: the mesh reports why
    const uint64_t sent = ledger.sent(ask->peer);
    const uint64_t awaited = ledger.awaited(ask->peer);
    if (ask->answered) {
      if (ask->report.begun >= awaited) continue;
      stalled.push_back(
          {ask->peer,
           awaited == sent
               ? fmt::format("it took up {} of the {} step commands sent to it ({} received)",
                             ask->report.begun, sent, ask->report.received)
               : fmt::format("it took up {} of the {} step commands node 0 waits on ({} sent, "
                             "{} received)",
                             ask->report.begun, awaited, sent, ask->report.received)});
    } else if (ask->error.empty()) {
      stalled.push_back(
          {ask->peer, fmt::format("it did not answer a progress probe within {:.1f} s",
                                  std::chrono::duration<double>(window).count())});
    } else {
      stalled.push_back({ask->peer, fmt::format("probing it failed: {}", ask->error)});
    }
  }
  return stalled;  // unanswered receives are cancelled with `asks`
}

}  // namespace tpnode::node
