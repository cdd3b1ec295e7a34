// The Mesh implementation over TCP (optionally TLS): a table of Links per peer, the liveness
// thread and the event callback. See mesh.h for the contract and link.h for the data path.
//
// Why plain POSIX sockets and not Boost.Asio for the data path: the latency goal needs the
// caller's thread to read and write its own socket (no hand-off to an io_context thread, no
// completion-handler allocation per message), with a short spin before poll(). That is a few
// non-blocking syscalls around a receive role and a send lock; Asio's proactor model would add
// the thread hop this design exists to avoid.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "mesh/link.h"
#include "mesh/liveness.h"
#include "mesh/mesh.h"

namespace tpnode::mesh {

class TcpMesh final : public Mesh {
 public:
  explicit TcpMesh(const MeshOptions& options);
  ~TcpMesh() override;

  // Adopts the established sockets (from formLinks) and starts the liveness thread.
  void start(std::vector<struct EstablishedSocket> sockets);

  int nodeId() const override { return node_id_; }
  int nodeCount() const override { return node_count_; }
  void send(int peer, uint32_t tag, std::span<const std::byte> data) override;
  size_t recv(int peer, uint32_t tag, std::span<std::byte> out) override;
  std::unique_ptr<Request> isend(int peer, uint32_t tag, std::span<const std::byte> data) override;
  std::unique_ptr<Request> irecv(int peer, uint32_t tag, std::span<std::byte> out) override;
  void setEventCallback(std::function<void(const PeerEvent&)> callback) override;
  bool peerAlive(int peer) const override;
  std::vector<LinkStats> linkStats(int rounds) override;
  void shutdown() override;

 private:
  Link& linkFor(int peer, uint32_t tag, bool user);
  void onLinkEvent(int peer, PeerEventKind kind, const std::string& reason);

  const MeshOptions options_;
  const int node_id_;
  const int node_count_;
  const int lanes_;
  std::vector<std::vector<std::unique_ptr<Link>>> links_;  // [peer][lane]; set once by start()
  std::unique_ptr<std::atomic<bool>[]> reported_;          // per peer: event delivered
  std::unique_ptr<Liveness> liveness_;
  std::mutex callback_mu_;
  std::function<void(const PeerEvent&)> callback_;  // guarded by callback_mu_
  std::once_flag shutdown_once_;
};

}  // namespace tpnode::mesh
