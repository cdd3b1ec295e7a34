// MeteredMesh: a Mesh that forwards every call to another one and counts, per peer, the bytes
// that went each way and the time its callers spent blocked on that peer (a blocking send or
// receive, and Request::wait() of an isend/irecv). A node whose collectives wait long on one
// link has found its slow host: the peer that computes, sends or routes slowly.
//
// Contract
// - The inner Mesh and the LinkMeters must outlive the MeteredMesh. The meters are meant to
//   outlive many meshes (a driver re-forms its cluster; counters keep counting).
// - Thread-safe like the inner mesh: the counters are atomics (relaxed; read them for
//   monitoring, not for synchronisation). test() is not timed (it does not block).
// - A receive that throws counts its time but no bytes.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "mesh/mesh.h"

namespace tpnode::mesh {

struct LinkMeter {
  std::atomic<uint64_t> bytes_sent{0};
  std::atomic<uint64_t> bytes_received{0};
  std::atomic<uint64_t> messages{0};  // sends and receives
  std::atomic<uint64_t> wait_ns{0};   // blocked in send/recv/wait on this peer
};

class LinkMeters {
 public:
  explicit LinkMeters(int nodes) : meters_(static_cast<size_t>(nodes)) {}
  int size() const { return static_cast<int>(meters_.size()); }
  LinkMeter& peer(int p) { return meters_.at(static_cast<size_t>(p)); }
  const LinkMeter& peer(int p) const { return meters_.at(static_cast<size_t>(p)); }

 private:
  std::vector<LinkMeter> meters_;
};

class MeteredMesh final : public Mesh {
 public:
  // `meters.size()` must be inner.nodeCount().
  MeteredMesh(Mesh& inner, LinkMeters& meters);

  int nodeId() const override { return inner_.nodeId(); }
  int nodeCount() const override { return inner_.nodeCount(); }
  void send(int peer, uint32_t tag, std::span<const std::byte> data) override;
  size_t recv(int peer, uint32_t tag, std::span<std::byte> out) override;
  std::unique_ptr<Request> isend(int peer, uint32_t tag, std::span<const std::byte> data) override;
  std::unique_ptr<Request> irecv(int peer, uint32_t tag, std::span<std::byte> out) override;
  void setEventCallback(std::function<void(const PeerEvent&)> callback) override {
    inner_.setEventCallback(std::move(callback));
  }
  bool peerAlive(int peer) const override { return inner_.peerAlive(peer); }
  void failPeer(int peer, const std::string& reason) override { inner_.failPeer(peer, reason); }
  std::vector<LinkStats> linkStats(int rounds) override { return inner_.linkStats(rounds); }
  void shutdown() override { inner_.shutdown(); }

 private:
  Mesh& inner_;         // outlives this (see contract)
  LinkMeters& meters_;  // outlives this
};

}  // namespace tpnode::mesh
