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
#include "node/modes.h"

namespace tpnode::node {

namespace {

constexpr uint32_t kTagStats = mesh::kFirstUserTag;
constexpr uint32_t kTagDone = mesh::kFirstUserTag + 1;
constexpr uint32_t kTagBye = mesh::kFirstUserTag + 2;

std::string readSecret(const Options& o) {
  if (!o.cluster_secret_file.empty()) {
    std::ifstream in(o.cluster_secret_file, std::ios::binary);
    if (!in) {
      fail(ErrorCode::kInvalidArgument, "--cluster-secret-file '{}' cannot be read",
           o.cluster_secret_file);
    }
    std::stringstream ss;
    ss << in.rdbuf();
    std::string secret = ss.str();
    while (!secret.empty() &&
           (secret.back() == '\n' || secret.back() == '\r' || secret.back() == ' ')) {
      secret.pop_back();
    }
    if (secret.empty()) {
      fail(ErrorCode::kInvalidArgument, "--cluster-secret-file '{}' is empty",
           o.cluster_secret_file);
    }
    struct stat st {};
    if (::stat(o.cluster_secret_file.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
      spdlog::warn("[mesh] --cluster-secret-file '{}' is readable by other users (chmod 600)",
                   o.cluster_secret_file);
    }
    return secret;
  }
  const char* env = std::getenv("TPNODE_CLUSTER_SECRET");
  return env != nullptr ? env : "";
}

mesh::MeshOptions meshOptions(const Options& o) {
  mesh::MeshOptions m;
  m.node_id = o.node_id;
  m.peers = mesh::parsePeerList(o.peers);
  if (o.connect_timeout_s <= 0 || o.liveness_timeout_s <= 0) {
    fail(ErrorCode::kInvalidArgument, "--connect-timeout and --liveness-timeout must be > 0");
  }
  m.connect_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.connect_timeout_s * 1e3));
  m.liveness_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.liveness_timeout_s * 1e3));
  m.heartbeat_interval = std::min(std::chrono::milliseconds(500), m.liveness_timeout / 4);
  m.sockets_per_peer = o.sockets_per_peer;
  m.cluster_secret = readSecret(o);
  m.tls = mesh::TlsOptions{o.tls_cert, o.tls_key, o.tls_ca};
  // What every node must agree on. --tp is the same flag on every node here, so the per-node
  // degrees are that value repeated; a cluster config will list them one by one.
  std::string peers, tps;
  for (size_t i = 0; i < m.peers.size(); ++i) {
    peers += (i ? "," : "") + m.peers[i].toString();
    tps += (i ? "," : "") + std::to_string(o.tp);
  }
  std::vector<std::string> items = {"peers=" + peers, "tp_per_node=" + tps, "model=none"};
  m.fingerprint = mesh::computeFingerprint(items);
  m.fingerprint_text = mesh::fingerprintText(items);
  if (m.cluster_secret.empty() && !m.tls.enabled()) {
    spdlog::warn(
        "[mesh] no cluster secret (--cluster-secret-file or TPNODE_CLUSTER_SECRET): "
        "any host that can reach these ports can join");
  }
  return m;
}

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
  mesh::MeshOptions mo = meshOptions(options);
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
