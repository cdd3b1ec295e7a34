// Mesh-only mode (--node-id/--peers, no --model): the smoke test operators run before loading
// a model. Forms the mesh, measures every link, prints the round-trip table on node 0, holds
// for --mesh-hold seconds, then leaves in a coordinated way so that no node sees another's exit
// as a fault.
#include <sys/stat.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

#include <spdlog/spdlog.h>

#include "common/error.h"
#include "mesh/mesh.h"
#include "mesh/tags.h"
#include "node/mesh_gather.h"
#include "node/mesh_setup.h"
#include "node/modes.h"

namespace tpnode::node {

namespace {

// Tags of the smoke test (mesh/tags.h; they were inside the collectives' range before).
constexpr uint32_t kTagStats = mesh::kMeshModeTags.at(0);
constexpr uint32_t kTagDone = mesh::kMeshModeTags.at(1);
constexpr uint32_t kTagBye = mesh::kMeshModeTags.at(2);

// Node 0 gathers every node's row of median round trips and prints the table.
void gatherAndPrintTable(mesh::Mesh& mesh, const std::vector<mesh::LinkStats>& own) {
  const int n = mesh.nodeCount();
  std::vector<double> row(static_cast<size_t>(n), 0.0);
  for (int p = 0; p < n; ++p) {
    const mesh::LinkStats& s = own[static_cast<size_t>(p)];
    if (!s.error.empty()) fail(ErrorCode::kPeerLost, "link to node {}: {}", p, s.error);
    row[static_cast<size_t>(p)] = s.rtt_us_median;
  }
  auto bytes = std::as_bytes(std::span(row));
  std::vector<Gathered> rows = gatherOnNode0(mesh, kTagStats, bytes, bytes.size());
  if (mesh.nodeId() != 0) return;
  std::vector<std::vector<double>> table(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) {
    const Gathered& g = rows[static_cast<size_t>(p)];
    if (!g.ok) fail(ErrorCode::kPeerLost, "node {} sent no link table row: {}", p, g.error);
    if (g.bytes.size() != bytes.size()) {
      fail(ErrorCode::kInvalidData, "node {} sent a malformed link table row", p);
    }
    table[static_cast<size_t>(p)].resize(static_cast<size_t>(n));
    std::memcpy(table[static_cast<size_t>(p)].data(), g.bytes.data(), g.bytes.size());
  }
  // A pair is measured by its lower node; show it in both cells.
  std::string out = "link round trips, 64-byte messages, median of 20 (microseconds):\n      ";
  for (int j = 0; j < n; ++j) out += fmt::format("{:>9}", fmt::format("node {}", j));
  out += "\n";
  for (int i = 0; i < n; ++i) {
    out += fmt::format("node {}", i);
    for (int j = 0; j < n; ++j) {
      double v = i < j ? table[static_cast<size_t>(i)][static_cast<size_t>(j)]
                       : table[static_cast<size_t>(j)][static_cast<size_t>(i)];
      out += i == j ? fmt::format("{:>9}", "-") : fmt::format("{:>9.1f}", v);
    }
    out += "\n";
  }
  std::fputs(out.c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace

int runMeshOnly(const Options& options) {
  mesh::MeshOptions mo = makeMeshOptions(options, "none");
  std::unique_ptr<mesh::Mesh> mesh = mesh::Mesh::connect(mo);

  std::mutex mu;
  std::condition_variable cv;
  std::vector<mesh::PeerEvent> lost;
  mesh->setEventCallback([&](const mesh::PeerEvent& e) {
    if (e.kind != mesh::PeerEventKind::kLost) return;
    std::lock_guard lock(mu);
    lost.push_back(e);
    cv.notify_all();
  });

  gatherAndPrintTable(*mesh, mesh->linkStats(20));
  if (options.mesh_hold_s > 0) {
    spdlog::info("[mesh] holding the mesh for {:.1f} s (--mesh-hold)", options.mesh_hold_s);
    std::unique_lock lock(mu);
    cv.wait_for(lock, std::chrono::duration<double>(options.mesh_hold_s),
                [&] { return !lost.empty(); });
    if (!lost.empty()) {
      const auto& e = lost.front();
      fail(ErrorCode::kPeerLost, "node {} at {} was lost: {}", e.peer,
           mo.peers[static_cast<size_t>(e.peer)].toString(), e.reason);
    }
  }
  if (!coordinatedExit(*mesh, kTagDone, kTagBye)) {
    fail(ErrorCode::kPeerLost, "a node was lost before the coordinated exit");
  }
  mesh->shutdown();
  spdlog::info("[mesh] node {} done", mo.node_id);
  return 0;
}

}  // namespace tpnode::node
