#include "node/progress_responder.h"

#include <array>
#include <chrono>
#include <memory>

#include <fmt/format.h>
#include "common/error.h"
#include "node/mesh_setup.h"

namespace tpnode::node {
namespace {

// How often the thread looks for a query (and for stop()): a probe waits at most this long.
constexpr auto kPollInterval = std::chrono::milliseconds(50);

}  // namespace

ProgressResponder::ProgressResponder(mesh::Mesh& mesh) : mesh_(mesh) {
  thread_ = std::thread([this] { loop(); });
}

ProgressResponder::~ProgressResponder() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ProgressResponder::loop() {
  std::array<std::byte, kProgressQueryBytes> in{};
  try {
    std::unique_ptr<mesh::Request> pending = mesh_.irecv(0, kTagProgress, in);
    for (;;) {
      {
        std::unique_lock lock(mu_);
        if (stop_) return;
        if (!pending->test()) {
          cv_.wait_for(lock, kPollInterval, [this] { return stop_; });
          continue;
        }
      }
      const size_t n = pending->wait();
      ProgressQuery query;
      try {
        query = decodeProgressQuery(std::span(in.data(), n));
      } catch (const Error& e) {
        mesh_.failPeer(0, fmt::format("a malformed progress query: {}", e.what()));
        return;
      }
      pending = mesh_.irecv(0, kTagProgress, in);
      handle(query);
    }
  } catch (const Error&) {
    // The link to node 0 failed or the mesh shut down: the session is ending.
  }
}

void ProgressResponder::setTierTally(std::shared_ptr<const KvTierTally> tally) {
  std::lock_guard lock(mu_);
  tally_ = std::move(tally);
}

void ProgressResponder::handle(const ProgressQuery& q) {
  if (q.node != static_cast<uint32_t>(mesh_.nodeId())) {
    mesh_.failPeer(
        0, fmt::format("a progress query for node {} reached node {}", q.node, mesh_.nodeId()));
    return;
  }
  if (q.kind == ProgressKind::kTierCounters) {
    TierReport t;
    t.probe = q.probe;
    t.node = q.node;
    std::shared_ptr<const KvTierTally> tally;
    {
      std::lock_guard lock(mu_);
      tally = tally_;
    }
    if (tally) t.ranks = tally->snapshot();
    if (t.ranks.size() > kMaxTierReportRanks) t.ranks.resize(kMaxTierReportRanks);
    mesh_.send(0, kTagTierReport, encodeTierReport(t));
    return;
  }
  ProgressReport r;
  r.probe = q.probe;
  r.node = q.node;
  r.begun = begun_.load();  // read first: begun <= received
  r.received = received_.load();
  mesh_.send(0, kTagProgressReport, encodeProgressReport(r));
}

}  // namespace tpnode::node
