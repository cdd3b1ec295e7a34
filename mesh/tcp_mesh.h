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
#include <vector>

#include "common/mutex.h"
#include "mesh/link.h"
#include "mesh/liveness.h"
#include "mesh/mesh.h"

namespace tpnode::mesh {

class TcpMesh final : public Mesh, private LinkGroup {
 public:
  // Starts the liveness thread; links arrive through adopt() while the mesh forms.
  explicit TcpMesh(const MeshOptions& options);
  ~TcpMesh() override;

  // Setup only (the connector's thread): makes a Link of an authenticated socket. A link that
  // died during setup is replaced (kept alive, retired, until the mesh is destroyed).
  void adopt(struct EstablishedSocket socket);
  bool linkUp(int peer, int lane) const;
  void setFormed() { formed_.store(true, std::memory_order_release); }

  int nodeId() const override { return node_id_; }
  int nodeCount() const override { return node_count_; }
  void send(int peer, uint32_t tag, std::span<const std::byte> data) override;
  size_t recv(int peer, uint32_t tag, std::span<std::byte> out) override;
  std::unique_ptr<Request> isend(int peer, uint32_t tag, std::span<const std::byte> data) override;
  std::unique_ptr<Request> irecv(int peer, uint32_t tag, std::span<std::byte> out) override;
  void setEventCallback(std::function<void(const PeerEvent&)> callback) override;
  bool peerAlive(int peer) const override;
  void failPeer(int peer, const std::string& reason) override;
  std::vector<LinkStats> linkStats(int rounds) override;
  void shutdown() override;

 private:
  Link& linkFor(int peer, uint32_t tag, bool user);
  bool drainOthers(const Link* self) override;
  void pollOthers(const Link* self, std::vector<pollfd>& out) override;
  void onLinkEvent(int peer, PeerEventKind kind, const std::string& reason);

  const MeshOptions options_;
  const int node_id_;
  const int node_count_;
  const int lanes_;
  // [peer][lane]. Written under setup_mu_ while the mesh forms, read-only after connect().
  std::vector<std::vector<std::unique_ptr<Link>>> links_;
  std::vector<std::unique_ptr<Link>> retired_ TP_GUARDED_BY(setup_mu_);
  mutable Mutex setup_mu_;
  std::unique_ptr<std::atomic<bool>[]> reported_;  // per peer: event delivered
  std::unique_ptr<Liveness> liveness_;
  Mutex callback_mu_;
  std::function<void(const PeerEvent&)> callback_ TP_GUARDED_BY(callback_mu_);
  std::once_flag shutdown_once_;
  std::atomic<bool> formed_{false};  // links_ is complete and immutable
};

}  // namespace tpnode::mesh
