#include "node/mesh_setup.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "common/error.h"
#include "mesh/secret.h"

namespace tpnode::node {

std::string readClusterSecret(const Options& o) {
  return mesh::loadClusterSecret(o.cluster_secret_file);
}

mesh::MeshOptions makeMeshOptions(const Options& o, const std::string& model_identity,
                                  const std::vector<std::string>& extra_items) {
  mesh::MeshOptions m;
  m.node_id = o.node_id;
  m.peers = mesh::parsePeerList(o.peers);
  if (!o.mesh_listen.empty()) {
    auto listen = mesh::parsePeerList(o.mesh_listen);
    if (listen.size() != 1) {
      fail(ErrorCode::kInvalidArgument, "--mesh-listen '{}' must be one host:port", o.mesh_listen);
    }
    m.listen = listen[0];
  }
  if (o.connect_timeout_s <= 0 || o.liveness_timeout_s <= 0) {
    fail(ErrorCode::kInvalidArgument, "--connect-timeout and --liveness-timeout must be > 0");
  }
  m.connect_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.connect_timeout_s * 1e3));
  m.liveness_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.liveness_timeout_s * 1e3));
  m.heartbeat_interval = std::min(std::chrono::milliseconds(500), m.liveness_timeout / 4);
  m.sockets_per_peer = o.sockets_per_peer;
  if (o.mesh_spin_us < 0 || o.mesh_spin_us > 1'000'000) {
    fail(ErrorCode::kInvalidArgument, "--mesh-spin-us {} is outside [0, 1000000]", o.mesh_spin_us);
  }
  m.spin = std::chrono::microseconds(o.mesh_spin_us);
  m.cluster_secret = readClusterSecret(o);
  m.tls = mesh::TlsOptions{o.tls_cert, o.tls_key, o.tls_ca};
  m.insecure = o.insecure;
  std::string peers, tps;
  for (size_t i = 0; i < m.peers.size(); ++i) {
    peers += (i ? "," : "") + m.peers[i].toString();
    int tp = i < o.tp_layout.size() ? o.tp_layout[i] : o.tp;
    tps += (i ? "," : "") + std::to_string(tp);
  }
  std::vector<std::string> items = {"peers=" + peers, "tp_per_node=" + tps,
                                    "model=" + model_identity,
                                    "wire_format=" + std::string(enumName(o.wire_format))};
  if (model_identity != "none") {
    // Every node sizes its KV cache and decodes step commands with these.
    items.push_back("slots=" + std::to_string(o.parallel));
    items.push_back("ctx_size=" + std::to_string(o.ctx_size));
    items.push_back("kv_blocks=" + std::to_string(o.kvBlocks()) + "x" +
                    std::to_string(o.kv_block_size));
    items.push_back("head=" + std::string(enumName(o.head)));
    items.push_back("moe_placement=" + std::string(enumName(o.moe_placement)));
    // Every node cuts its own stage before the mesh forms, so every node must be started with
    // the same stages; the keys name the flags, which a refusal then names with each node's.
    items.push_back("stages (--pp, --split)=" + std::to_string(std::max(1, o.pp)));
    if (o.pp > 1) {
      items.push_back("stage layers (--pp-layers)=" +
                      (o.pp_layers.empty() ? std::string("balanced") : o.pp_layers));
    }
  }
  items.insert(items.end(), extra_items.begin(), extra_items.end());
  m.fingerprint = mesh::computeFingerprint(items);
  m.fingerprint_text = mesh::fingerprintText(items);
  return m;
}

}  // namespace tpnode::node
