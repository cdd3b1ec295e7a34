#include "node/mesh_gather.h"

#include <spdlog/spdlog.h>

#include "common/error.h"

namespace tpnode::node {

std::vector<Gathered> gatherOnNode0(mesh::Mesh& mesh, uint32_t tag, std::span<const std::byte> own,
                                    size_t max_bytes) {
  if (mesh.nodeId() != 0) {
    try {
      mesh.send(0, tag, own);
    } catch (const Error& e) {
      spdlog::warn("[mesh] could not send to node 0: {}", e.what());
    }
    return {};
  }
  std::vector<Gathered> out(static_cast<size_t>(mesh.nodeCount()));
  out[0].ok = true;
  out[0].bytes.assign(own.begin(), own.end());
  for (int p = 1; p < mesh.nodeCount(); ++p) {
    Gathered& g = out[static_cast<size_t>(p)];
    try {
      g.bytes.resize(max_bytes);
      g.bytes.resize(mesh.recv(p, tag, g.bytes));
      g.ok = true;
    } catch (const Error& e) {
      g.bytes.clear();
      g.error = e.what();
    }
  }
  return out;
}

bool coordinatedExit(mesh::Mesh& mesh, uint32_t tag_done, uint32_t tag_bye) {
  std::byte token[1] = {std::byte{1}};
  bool all = true;
  auto step = [&](int peer, bool send, uint32_t tag) {
    // A receive still gets what the peer sent before it closed (its BYE may come with its
    // GOODBYE), so only a send skips a peer already gone.
    if (send && !mesh.peerAlive(peer)) {
      all = false;
      return;
    }
    try {
      if (send) {
        mesh.send(peer, tag, token);
      } else {
        mesh.recv(peer, tag, token);
      }
    } catch (const Error& e) {
      spdlog::warn("[mesh] node {} left before the coordinated exit: {}", peer, e.what());
      all = false;
    }
  };
  if (mesh.nodeId() == 0) {
    for (int p = 1; p < mesh.nodeCount(); ++p) step(p, false, tag_done);
    for (int p = 1; p < mesh.nodeCount(); ++p) step(p, true, tag_bye);
  } else {
    step(0, true, tag_done);
    step(0, false, tag_bye);
  }
  return all;
}

}  // namespace tpnode::node
