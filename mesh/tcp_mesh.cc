#include "mesh/tcp_mesh.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "mesh/connector.h"
#include "mesh/tags.h"
#include "mesh/tls.h"
#include "mesh/validate.h"

namespace tpnode::mesh {

namespace {

constexpr uint32_t kPingTag = kMeshInternalTags.at(1);
static_assert(kFirstUserTag == kMeshInternalTags.end(),
              "mesh.h's first user tag and the mesh's range in mesh/tags.h disagree");

class DoneRequest final : public Request {
 public:
  explicit DoneRequest(size_t size) : size_(size) {}
  size_t wait() override { return size_; }
  bool test() override { return true; }

 private:
  size_t size_;
};

class RecvRequest final : public Request {
 public:
  RecvRequest(Link& link, uint32_t tag, std::span<std::byte> out) : link_(link) {
    link_.post(op_, tag, out);
  }
  ~RecvRequest() override {
    if (!waited_) link_.cancel(op_);
  }
  size_t wait() override {
    waited_ = true;
    return link_.wait(op_);
  }
  bool test() override { return link_.test(op_); }

 private:
  Link& link_;  // outlives the request: links live as long as the mesh
  RecvOp op_;
  bool waited_ = false;
};

}  // namespace

void validateMeshOptions(const MeshOptions& o) {
  const int n = static_cast<int>(o.peers.size());
  if (n < 1) fail(ErrorCode::kInvalidArgument, "--peers lists no node");
  if (o.node_id < 0 || o.node_id >= n) {
    fail(ErrorCode::kInvalidArgument, "--node-id {} is not in 0..{} (--peers lists {} nodes)",
         o.node_id, n - 1, n);
  }
  if (o.sockets_per_peer < 1 || o.sockets_per_peer > 16) {
    fail(ErrorCode::kInvalidArgument, "--sockets-per-peer {} is not in 1..16", o.sockets_per_peer);
  }
  if (!o.cluster_secret.empty() && o.cluster_secret.size() < kMinSecretBytes) {
    fail(ErrorCode::kInvalidArgument,
         "the cluster secret is {} bytes ({} bits); at least {} bytes ({} bits) of random data "
         "are required: make one with `tpnode gen-secret FILE`",
         o.cluster_secret.size(), o.cluster_secret.size() * 8, kMinSecretBytes,
         kMinSecretBytes * 8);
  }
  if (n > 1 && o.cluster_secret.empty() && !o.tls.enabled() && !o.insecure) {
    fail(ErrorCode::kInvalidArgument,
         "a mesh of {} nodes needs a cluster secret: run `tpnode gen-secret FILE` once, copy FILE "
         "(mode 0600) to every node and pass --cluster-secret-file FILE (or set "
         "TPNODE_CLUSTER_SECRET), or use mutual TLS (--tls-cert/--tls-key/--tls-ca, certificates "
         "naming tpnode-node-<id>); --insecure allows a mesh anyone who reaches the port can join "
         "(docs/security.md)",
         n);
  }
  if (o.connect_timeout.count() <= 0 || o.liveness_timeout.count() <= 0 ||
      o.heartbeat_interval.count() <= 0) {
    fail(ErrorCode::kInvalidArgument, "the connect and liveness timeouts must be positive");
  }
}

TcpMesh::TcpMesh(const MeshOptions& options)
    : options_(options),
      node_id_(options.node_id),
      node_count_(static_cast<int>(options.peers.size())),
      lanes_(options.sockets_per_peer),
      links_(static_cast<size_t>(node_count_)),
      reported_(std::make_unique<std::atomic<bool>[]>(static_cast<size_t>(node_count_))) {
  for (auto& lanes : links_) lanes.resize(static_cast<size_t>(lanes_));
  auto tick = std::clamp(options_.heartbeat_interval / 5, std::chrono::milliseconds(10),
                         std::chrono::milliseconds(100));
  liveness_ = std::make_unique<Liveness>(tick);
}

TcpMesh::~TcpMesh() {
  shutdown();
}

void TcpMesh::adopt(EstablishedSocket s) {
  LinkOptions lo;
  lo.peer = s.peer;
  lo.lane = s.lane;
  lo.peer_name =
      fmt::format("node {} at {}", s.peer, options_.peers[static_cast<size_t>(s.peer)].toString());
  lo.max_frame_bytes = options_.max_frame_bytes;
  lo.spin = options_.spin;
  lo.heartbeat_interval = options_.heartbeat_interval;
  lo.liveness_timeout = options_.liveness_timeout;
  const int peer = s.peer;
  auto link = std::make_unique<Link>(std::move(s.transport), std::move(lo),
                                     [this, peer](PeerEventKind kind, const std::string& reason) {
                                       onLinkEvent(peer, kind, reason);
                                     });
  Link* raw = link.get();
  raw->setGroup(this);
  {
    MutexLock lock(setup_mu_);
    auto& slot = links_[static_cast<size_t>(peer)][static_cast<size_t>(s.lane)];
    if (slot)
      retired_.push_back(std::move(slot));  // died during setup; the liveness thread
                                            // may still hold a pointer to it
    slot = std::move(link);
    reported_[static_cast<size_t>(peer)].store(false);
  }
  liveness_->add(raw);
}

bool TcpMesh::linkUp(int peer, int lane) const {
  Link* link = nullptr;
  {
    MutexLock lock(setup_mu_);
    link = links_[static_cast<size_t>(peer)][static_cast<size_t>(lane)].get();
  }
  // Outside the lock: a hang-up fails the link, whose event handler takes setup_mu_. The link
  // stays valid: links replaced during setup are retired, not destroyed.
  if (link == nullptr) return false;
  link->noticeHangup();
  return link->alive();
}

void TcpMesh::onLinkEvent(int peer, PeerEventKind kind, const std::string& reason) {
  if (reported_[static_cast<size_t>(peer)].exchange(true)) return;
  const std::string name =
      fmt::format("node {} at {}", peer, options_.peers[static_cast<size_t>(peer)].toString());
  if (kind == PeerEventKind::kClosed) {
    spdlog::info("[mesh] {} shut down", name);
  } else {
    spdlog::warn("[mesh] lost {}: {}", name, reason);
  }
  // A peer that closed in order says GOODBYE on each of its lanes after what it sent there:
  // each lane ends at its own GOODBYE (or end of stream), so that nothing sent before is lost.
  // Any other failure ends them all now.
  std::vector<Link*> lanes;
  if (kind != PeerEventKind::kClosed) {
    MutexLock lock(setup_mu_);
    for (auto& link : links_[static_cast<size_t>(peer)]) {
      if (link) lanes.push_back(link.get());
    }
  }
  for (Link* link : lanes) link->fail(ErrorCode::kPeerLost, reason, kind);
  std::function<void(const PeerEvent&)> callback;
  {
    MutexLock lock(callback_mu_);
    callback = callback_;
  }
  if (!callback) return;
  try {
    callback(PeerEvent{kind, peer, reason});
  } catch (const std::exception& e) {
    spdlog::error("[mesh] the peer event callback threw: {}", e.what());
  }
}

Link& TcpMesh::linkFor(int peer, uint32_t tag, bool user) {
  if (peer < 0 || peer >= node_count_ || peer == node_id_) {
    fail(ErrorCode::kInvalidArgument, "peer {} is not another node of this {}-node mesh", peer,
         node_count_);
  }
  if (user && tag < kFirstUserTag) {
    fail(ErrorCode::kInvalidArgument, "tag {} is reserved for the mesh (use >= {})", tag,
         kFirstUserTag);
  }
  return *links_[static_cast<size_t>(peer)][tag % static_cast<uint32_t>(lanes_)];
}

bool TcpMesh::drainOthers(const Link* self) {
  if (!formed_.load(std::memory_order_acquire)) return false;
  bool progress = false;
  for (auto& lanes : links_) {
    for (auto& link : lanes) {
      if (link && link.get() != self && link->drain()) progress = true;
    }
  }
  return progress;
}

void TcpMesh::pollOthers(const Link* self, std::vector<pollfd>& out) {
  if (!formed_.load(std::memory_order_acquire)) return;
  for (auto& lanes : links_) {
    for (auto& link : lanes) {
      if (link && link.get() != self && link->alive()) out.push_back({link->fd(), POLLIN, 0});
    }
  }
}

void TcpMesh::send(int peer, uint32_t tag, std::span<const std::byte> data) {
  linkFor(peer, tag, true).send(tag, data);
}

size_t TcpMesh::recv(int peer, uint32_t tag, std::span<std::byte> out) {
  return linkFor(peer, tag, true).recv(tag, out);
}

std::unique_ptr<Request> TcpMesh::isend(int peer, uint32_t tag, std::span<const std::byte> data) {
  // The send runs on the caller's thread now; while the socket is full it drains incoming
  // frames, so crossing isends of two nodes cannot deadlock.
  linkFor(peer, tag, true).send(tag, data);
  return std::make_unique<DoneRequest>(data.size());
}

std::unique_ptr<Request> TcpMesh::irecv(int peer, uint32_t tag, std::span<std::byte> out) {
  return std::make_unique<RecvRequest>(linkFor(peer, tag, true), tag, out);
}

void TcpMesh::setEventCallback(std::function<void(const PeerEvent&)> callback) {
  MutexLock lock(callback_mu_);
  callback_ = std::move(callback);
}

bool TcpMesh::peerAlive(int peer) const {
  if (peer < 0 || peer >= node_count_ || peer == node_id_) return false;
  for (const auto& link : links_[static_cast<size_t>(peer)]) {
    if (!link || !link->alive()) return false;
  }
  return true;
}

void TcpMesh::failPeer(int peer, const std::string& reason) {
  if (peer < 0 || peer >= node_count_ || peer == node_id_) return;
  onLinkEvent(peer, PeerEventKind::kLost, reason);
}

std::vector<LinkStats> TcpMesh::linkStats(int rounds) {
  std::vector<LinkStats> out(static_cast<size_t>(node_count_));
  std::array<std::byte, 64> ping{};
  // Pairs (i, j), i < j, in lexicographic order: every node walks its own pairs in that order,
  // which is deadlock-free. The lower node of a pair pings, the higher one echoes.
  for (int peer = 0; peer < node_count_; ++peer) {
    if (peer == node_id_) continue;
    Link& link = linkFor(peer, kPingTag, false);
    std::vector<double> rtts;
    LinkStats s;
    s.peer = peer;
    try {
      for (int r = 0; r < rounds; ++r) {
        if (node_id_ < peer) {
          auto t0 = Clock::now();
          link.send(kPingTag, ping);
          link.recv(kPingTag, ping);
          rtts.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        } else {
          link.recv(kPingTag, ping);
          link.send(kPingTag, ping);
        }
      }
    } catch (const Error& e) {
      s.error = e.what();
      rtts.clear();
    }
    for (const auto& l : links_[static_cast<size_t>(peer)]) {
      LinkStats ls = l->stats();
      s.bytes_sent += ls.bytes_sent;
      s.bytes_received += ls.bytes_received;
      s.frames_sent += ls.frames_sent;
      s.frames_received += ls.frames_received;
    }
    if (!rtts.empty()) {
      std::sort(rtts.begin(), rtts.end());
      s.rtt_us_median = rtts[rtts.size() / 2];
      s.rtt_us_p99 = rtts[std::min(rtts.size() - 1, rtts.size() * 99 / 100)];
      s.rtt_us_min = rtts.front();
      s.rtt_us_max = rtts.back();
    }
    out[static_cast<size_t>(peer)] = s;
  }
  return out;
}

void TcpMesh::shutdown() {
  std::call_once(shutdown_once_, [this] {
    for (auto& lanes : links_) {
      for (auto& link : lanes) {
        if (link) link->setQuiet();
      }
    }
    if (liveness_) liveness_->stop();
    auto deadline = Clock::now() + std::chrono::seconds(1);
    for (auto& lanes : links_) {
      for (auto& link : lanes) {
        if (link) link->sayGoodbye(deadline);
      }
    }
    deadline = Clock::now() + std::chrono::seconds(2);
    for (auto& lanes : links_) {
      for (auto& link : lanes) {
        if (link) link->drainUntilClosed(deadline);
      }
    }
    for (auto& lanes : links_) {
      for (auto& link : lanes) {
        if (link) link->fail(ErrorCode::kAborted, "the mesh was shut down");
      }
    }
  });
}

std::unique_ptr<Mesh> Mesh::connect(const MeshOptions& options) {
  validateMeshOptions(options);
  std::shared_ptr<TlsContext> tls;
  if (options.tls.enabled() || !options.tls.ca_file.empty() || !options.tls.key_file.empty()) {
    tls = TlsContext::create(options.tls);
  }
  TransportFactory factory = [tls](Fd fd, bool accepting, Clock::time_point deadline) {
    if (tls) return tls->wrap(std::move(fd), accepting, deadline);
    return makePlainTransport(std::move(fd));
  };
  auto mesh = std::make_unique<TcpMesh>(options);
  const int n = static_cast<int>(options.peers.size());
  if (n > 1 && options.cluster_secret.empty() && !tls) {
    spdlog::warn(
        "[mesh] --insecure: no cluster secret and no TLS; any host that can reach port {} can "
        "join this mesh as any node",
        (options.listen ? *options.listen : options.peers[static_cast<size_t>(options.node_id)])
            .port);
  }
  if (n > 1) {
    LinkSink sink{[&](EstablishedSocket s) { mesh->adopt(std::move(s)); },
                  [&](int peer, int lane) { return mesh->linkUp(peer, lane); }};
    formLinks(options, factory, sink);
  }
  mesh->setFormed();
  spdlog::info("[mesh] node {}/{} connected to all peers", options.node_id, n);
  return mesh;
}

}  // namespace tpnode::mesh
