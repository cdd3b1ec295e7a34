// FakeNetwork: an in-process test double of mesh::Mesh. Nodes are threads of the test; each
// gets a FakeMesh from network->mesh(node). Messages are copied into per-(from, to, tag) FIFO
// queues under one mutex, so the ordering contract of mesh.h holds. kill(node) simulates the
// death of a node: every survivor's pending and later operation with it throws
// Error(kPeerLost), survivors' event callbacks fire (kLost), and the dead node's own
// operations throw Error(kAborted).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "mesh/mesh.h"

namespace tpnode::collectives::testing {

class FakeNetwork : public std::enable_shared_from_this<FakeNetwork> {
 public:
  static std::shared_ptr<FakeNetwork> create(int nodes) {
    return std::shared_ptr<FakeNetwork>(new FakeNetwork(nodes));
  }
  std::unique_ptr<mesh::Mesh> mesh(int node);
  void kill(int node);
  int nodes() const { return nodes_; }

  // For FakeMesh.
  void send(int from, int to, uint32_t tag, std::span<const std::byte> data);
  size_t recv(int to, int from, uint32_t tag, std::span<std::byte> out);
  bool ready(int to, int from, uint32_t tag);
  void setCallback(int node, std::function<void(const mesh::PeerEvent&)> callback);
  bool alive(int node);

 private:
  explicit FakeNetwork(int nodes)
      : nodes_(nodes),
        dead_(static_cast<size_t>(nodes), false),
        callbacks_(static_cast<size_t>(nodes)) {}
  void checkAliveLocked(int self, int peer);

  const int nodes_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::tuple<int, int, uint32_t>, std::deque<std::vector<std::byte>>> queues_;
  std::vector<bool> dead_;
  std::vector<std::function<void(const mesh::PeerEvent&)>> callbacks_;
};

}  // namespace tpnode::collectives::testing
