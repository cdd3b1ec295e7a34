#include "mesh/connector.h"

#include <poll.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include <spdlog/spdlog.h>

#include "mesh/handshake.h"

namespace tpnode::mesh {

namespace {

constexpr std::chrono::milliseconds kCancelPoll{100};

constexpr auto kHandshakeTimeout = std::chrono::seconds(10);
constexpr auto kWaitingLogPeriod = std::chrono::seconds(5);

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

class Connector {
 public:
  Connector(const MeshOptions& options, const TransportFactory& make_transport)
      : o_(options),
        make_transport_(make_transport),
        n_(static_cast<int>(options.peers.size())),
        lanes_(options.sockets_per_peer),
        start_(Clock::now()),
        deadline_(start_ + options.connect_timeout),
        slots_(static_cast<size_t>(n_ * lanes_)),
        slot_from_(slots_.size()),
        problem_(static_cast<size_t>(n_), "nothing heard yet"),
        last_refusal_(static_cast<size_t>(n_)) {}

  std::vector<EstablishedSocket> run();

 private:
  std::string name(int node) const {
    return fmt::format("node {} at {}", node, o_.peers[static_cast<size_t>(node)].toString());
  }
  size_t slot(int peer, int lane) const { return static_cast<size_t>(peer * lanes_ + lane); }
  bool completeLocked() const;
  void dialLoop(int peer, int lane);
  void acceptLoop(int listen_fd);
  void acceptOne(Fd fd, std::string from);
  // Runs the handshake; on success stores the socket and returns true.
  bool handshake(std::unique_ptr<Transport> transport, int expected_peer, int lane,
                 const std::string& from);
  std::string admitLocked(int peer, int lane, const std::string& from);
  // Records the latest problem with `peer`; a refusal (its reason in `refusal`) is logged as
  // a warning the first time that reason is seen.
  void noteProblem(int peer, const std::string& problem, const std::string& refusal);

  const MeshOptions& o_;
  const TransportFactory& make_transport_;
  const int n_;
  const int lanes_;
  const Clock::time_point start_;
  const Clock::time_point deadline_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                              // guarded by mu_
  std::vector<std::unique_ptr<Transport>> slots_;  // guarded by mu_
  std::vector<std::string> slot_from_;             // guarded by mu_: "" = free
  std::vector<std::string> problem_;               // guarded by mu_
  std::vector<std::string> last_refusal_;          // guarded by mu_
  std::vector<std::thread> handshakers_;           // guarded by mu_
};

bool Connector::completeLocked() const {
  for (int peer = 0; peer < n_; ++peer) {
    if (peer == o_.node_id) continue;
    for (int lane = 0; lane < lanes_; ++lane) {
      if (!slots_[slot(peer, lane)]) return false;
    }
  }
  return true;
}

void Connector::noteProblem(int peer, const std::string& problem, const std::string& refusal) {
  std::lock_guard lock(mu_);
  problem_[static_cast<size_t>(peer)] = problem;
  std::string& last = last_refusal_[static_cast<size_t>(peer)];
  if (!refusal.empty() && refusal != last) spdlog::warn("[mesh] {}", problem);
  if (!refusal.empty()) last = refusal;
}

std::string Connector::admitLocked(int peer, int lane, const std::string& from) {
  if (peer < o_.node_id) {
    return fmt::format(
        "node id: node {} dialed node {}, but the rule is that higher ids dial "
        "lower ones (are both --node-id values right?)",
        peer, o_.node_id);
  }
  const std::string& holder = slot_from_[slot(peer, lane)];
  if (!holder.empty()) {
    return fmt::format(
        "duplicate node id {}: node {} is already {} from {}; refusing the "
        "second node {} from {}",
        peer, peer, slots_[slot(peer, lane)] ? "connected" : "connecting", holder, peer, from);
  }
  slot_from_[slot(peer, lane)] = from;
  return {};
}

bool Connector::handshake(std::unique_ptr<Transport> t, int expected_peer, int lane,
                          const std::string& from) {
  HandshakeConfig config;
  config.node_id = o_.node_id;
  config.node_count = n_;
  config.lane = lane;
  config.lanes = lanes_;
  config.fingerprint = o_.fingerprint;
  config.fingerprint_text = o_.fingerprint_text;
  config.secret = o_.cluster_secret;
  config.expected_peer = expected_peer;
  config.admit = [&](int peer, int peer_lane) {
    std::lock_guard lock(mu_);
    return admitLocked(peer, peer_lane, from);
  };
  Nonce nonce{};
  randomBytes(nonce);
  Handshake hs(std::move(config), nonce);
  auto deadline = std::min(deadline_, Clock::now() + kHandshakeTimeout);
  std::vector<uint8_t> payload;
  try {
    writeAll(*t, hs.start(), deadline);
    while (hs.state() != Handshake::State::kDone && hs.state() != Handshake::State::kFailed) {
      std::array<uint8_t, kFrameHeaderSize> header{};
      readFull(*t, header, deadline);
      std::vector<uint8_t> reply;
      try {
        FrameHeader h = decodeFrameHeader(header, 0);
        payload.resize(h.length);
        readFull(*t, payload, deadline);
        reply = hs.onFrame(h.type, payload);
      } catch (const Error& e) {
        reply = hs.abort(e);
      }
      if (!reply.empty()) writeAll(*t, reply, deadline);
    }
  } catch (const Error& e) {
    hs.abort(e);
  }
  const int peer = expected_peer >= 0 ? expected_peer : hs.claimedPeer();
  const std::string who = expected_peer >= 0 ? name(peer)
                          : peer >= 0 ? fmt::format("node {} (connecting from {})", peer, from)
                                      : fmt::format("a peer connecting from {}", from);
  if (hs.state() == Handshake::State::kDone) {
    std::lock_guard lock(mu_);
    slot_from_[slot(peer, hs.lane())] = from;
    slots_[slot(peer, hs.lane())] = std::move(t);
    spdlog::debug("[mesh] {} connected (socket {}, from {})", name(peer), hs.lane(), from);
    cv_.notify_all();
    return true;
  }
  if (expected_peer < 0 && hs.peerId() >= 0) {
    std::lock_guard lock(mu_);
    std::string& holder = slot_from_[slot(hs.peerId(), hs.lane())];
    if (holder == from && !slots_[slot(hs.peerId(), hs.lane())]) holder.clear();
  }
  std::string message = hs.refusedByPeer() ? fmt::format("{} refused us: {}", who, hs.error())
                                           : fmt::format("refused {}: {}", who, hs.error());
  if (peer >= 0) {
    noteProblem(peer, message, hs.error());
  } else {
    spdlog::warn("[mesh] {}", message);
  }
  return false;
}

void Connector::dialLoop(int peer, int lane) {
  auto backoff = std::chrono::milliseconds(100);
  const PeerAddress& address = o_.peers[static_cast<size_t>(peer)];
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stop_ || Clock::now() >= deadline_) return;
    }
    std::string why;
    Fd fd = connectOnce(address, std::chrono::milliseconds(1000), why);
    if (fd.valid()) {
      try {
        auto deadline = std::min(deadline_, Clock::now() + kHandshakeTimeout);
        if (o_.socket_buffer_bytes > 0) setBuffers(fd.get(), o_.socket_buffer_bytes);
        if (handshake(make_transport_(std::move(fd), false, deadline), peer, lane,
                      address.toString())) {
          return;
        }
      } catch (const Error& e) {
        noteProblem(peer, fmt::format("{}: {}", name(peer), e.what()), e.what());
      }
      backoff = std::max(backoff, std::chrono::milliseconds(1000));
    } else {
      noteProblem(peer, why, {});
    }
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, backoff, [&] { return stop_; });
    backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
  }
}

void Connector::acceptOne(Fd fd, std::string from) {
  try {
    auto deadline = std::min(deadline_, Clock::now() + kHandshakeTimeout);
    if (o_.socket_buffer_bytes > 0) setBuffers(fd.get(), o_.socket_buffer_bytes);
    handshake(make_transport_(std::move(fd), true, deadline), -1, 0, from);
  } catch (const Error& e) {
    spdlog::warn("[mesh] refused a connection from {}: {}", from, e.what());
  }
}

void Connector::acceptLoop(int listen_fd) {
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stop_ || Clock::now() >= deadline_) return;
    }
    pollfd p{listen_fd, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    std::string from;
    Fd fd = mesh::acceptOne(listen_fd, from);
    if (!fd.valid()) continue;
    std::lock_guard lock(mu_);
    handshakers_.emplace_back(
        [this, f = std::make_shared<Fd>(std::move(fd)), from] { acceptOne(std::move(*f), from); });
  }
}

std::vector<EstablishedSocket> Connector::run() {
  const int me = o_.node_id;
  Fd listener;
  if (me < n_ - 1) listener = listenOn(o_.peers[static_cast<size_t>(me)]);
  std::vector<std::thread> threads;
  for (int peer = 0; peer < me; ++peer) {
    for (int lane = 0; lane < lanes_; ++lane)
      threads.emplace_back([=, this] { dialLoop(peer, lane); });
  }
  if (listener.valid()) threads.emplace_back([&] { acceptLoop(listener.get()); });

  std::unique_lock lock(mu_);
  auto next_log = start_ + kWaitingLogPeriod;
  auto cancelled = [&] { return o_.cancel != nullptr && o_.cancel->load(); };
  while (!completeLocked() && Clock::now() < deadline_ && !cancelled()) {
    // Wake at least every 100 ms to notice MeshOptions::cancel.
    cv_.wait_until(lock, std::min({next_log, deadline_, Clock::now() + kCancelPoll}));
    if (Clock::now() >= next_log && !completeLocked()) {
      for (int peer = 0; peer < n_; ++peer) {
        bool up = true;
        for (int lane = 0; lane < lanes_ && peer != me; ++lane) {
          up = up && slots_[slot(peer, lane)] != nullptr;
        }
        if (up) continue;
        spdlog::info("[mesh] waiting for {}, {:.0f} s ({})", name(peer), secondsSince(start_),
                     problem_[static_cast<size_t>(peer)]);
      }
      next_log += kWaitingLogPeriod;
    }
  }
  bool complete = completeLocked();
  stop_ = true;
  cv_.notify_all();
  lock.unlock();
  for (auto& t : threads) t.join();
  lock.lock();
  auto handshakers = std::move(handshakers_);
  lock.unlock();
  for (auto& t : handshakers) t.join();
  lock.lock();
  if (!complete && cancelled()) {
    fail(ErrorCode::kAborted, "node {}: connecting to the mesh was cancelled (shutting down)", me);
  }
  if (!complete && !completeLocked()) {
    std::string missing;
    for (int peer = 0; peer < n_; ++peer) {
      bool up = true;
      for (int lane = 0; lane < lanes_ && peer != me; ++lane) {
        up = up && slots_[slot(peer, lane)] != nullptr;
      }
      if (up) continue;
      if (!missing.empty()) missing += "; ";
      missing += fmt::format("{} (last: {})", name(peer), problem_[static_cast<size_t>(peer)]);
    }
    fail(ErrorCode::kTimeout, "node {} gave up after {:.0f} s (--connect-timeout) waiting for {}",
         me, secondsSince(start_), missing);
  }
  std::vector<EstablishedSocket> out;
  for (int peer = 0; peer < n_; ++peer) {
    if (peer == me) continue;
    for (int lane = 0; lane < lanes_; ++lane) {
      out.push_back({peer, lane, std::move(slots_[slot(peer, lane)])});
    }
  }
  return out;
}

}  // namespace

std::vector<EstablishedSocket> formLinks(const MeshOptions& options,
                                         const TransportFactory& make_transport) {
  Connector connector(options, make_transport);
  return connector.run();
}

}  // namespace tpnode::mesh
