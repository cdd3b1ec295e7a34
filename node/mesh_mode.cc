// Mesh-only mode (--node-id/--peers, no --model): the smoke test operators run before loading
// a model. Forms the mesh, measures every link, prints the round-trip table on node 0, holds
// for --mesh-hold seconds, then leaves in a coordinated way so that no node sees another's exit
// as a fault.
#include <sys/stat.h>

#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>

#include <spdlog/spdlog.h>

#include "common/error.h"
#include "mesh/mesh.h"
#include "node/mesh_setup.h"
#include "node/modes.h"

namespace tpnode::node {

namespace {

constexpr uint32_t kTagStats = mesh::kFirstUserTag;
constexpr uint32_t kTagDone = mesh::kFirstUserTag + 1;
constexpr uint32_t kTagBye = mesh::kFirstUserTag + 2;

// Node 0 gathers every node's row of median round trips and prints the table.
void gatherAndPrintTable(mesh::Mesh& mesh, const std::vector<mesh::LinkStats>& own) {
  const int n = mesh.nodeCount();
  std::vector<double> row(static_cast<size_t>(n), 0.0);
  for (int p = 0; p < n; ++p)
    row[static_cast<size_t>(p)] = own[static_cast<size_t>(p)].rtt_us_median;
  auto bytes = std::as_writable_bytes(std::span(row));
  if (mesh.nodeId() != 0) {
    mesh.send(0, kTagStats, bytes);
    return;
  }
  std::vector<std::vector<double>> table(static_cast<size_t>(n));
  table[0] = row;
  for (int p = 1; p < n; ++p) {
    std::vector<double> r(static_cast<size_t>(n));
    if (mesh.recv(p, kTagStats, std::as_writable_bytes(std::span(r))) != bytes.size()) {
      fail(ErrorCode::kInvalidData, "node {} sent a malformed link table row", p);
    }
    table[static_cast<size_t>(p)] = r;
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

// Every node tells node 0 it is done; node 0 then tells everyone to leave.
void coordinatedExit(mesh::Mesh& mesh) {
  std::byte token[1] = {std::byte{1}};
  if (mesh.nodeId() == 0) {
    for (int p = 1; p < mesh.nodeCount(); ++p) mesh.recv(p, kTagDone, token);
    for (int p = 1; p < mesh.nodeCount(); ++p) mesh.send(p, kTagBye, token);
  } else {
    mesh.send(0, kTagDone, token);
    mesh.recv(0, kTagBye, token);
  }
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
  coordinatedExit(*mesh);
  mesh->shutdown();
  spdlog::info("[mesh] node {} done", mo.node_id);
  return 0;
}

}  // namespace tpnode::node
