#include "mesh/connector.h"

#include <malloc.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

#include <list>
#include <map>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/log.h"
#include "common/mutex.h"
#include "mesh/handshake.h"

namespace tpnode::mesh {

namespace {

constexpr auto kHandshakeTimeout = std::chrono::seconds(10);
// An accepted peer must have proved itself (TLS, then HELLO) within this.
constexpr auto kPreAuthTimeout = std::chrono::seconds(5);
constexpr int kMaxHandshakesPerSource = 8;
constexpr auto kFirstWaitingLog = std::chrono::seconds(2);
constexpr auto kWaitingLogPeriod = std::chrono::seconds(5);
constexpr auto kRecheck = std::chrono::milliseconds(250);  // how often dead links are noticed
constexpr int kMaxConcurrentHandshakes = 64;
// While handshake threads end, what they freed is given back to the system at most this often.
constexpr auto kTrimInterval = std::chrono::seconds(1);

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// "ip" of "ip:port" (or "[v6]" of "[v6]:port"): handshakes are counted per source address.
std::string sourceOf(const std::string& from) {
  size_t colon = from.rfind(':');
  return colon == std::string::npos ? from : from.substr(0, colon);
}

// Returns the free pages of the heap to the system: a burst of handshakes (a flood of
// connections) leaves freed memory that malloc would otherwise keep.
void releaseFreedMemory() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

// One thread running an accepted connection's handshake; reaped as soon as it is done.
struct Handshaker {
  std::thread thread;
  bool done = false;  // guarded by Connector::mu_
};

class Connector {
 public:
  Connector(const MeshOptions& options, const TransportFactory& make_transport,
            const LinkSink& sink)
      : o_(options),
        make_transport_(make_transport),
        sink_(sink),
        n_(static_cast<int>(options.peers.size())),
        lanes_(options.sockets_per_peer),
        start_(Clock::now()),
        deadline_(start_ + options.connect_timeout),
        in_flight_(static_cast<size_t>(n_ * lanes_)),
        connected_from_(in_flight_.size()),
        problem_(static_cast<size_t>(n_), "nothing heard yet"),
        last_refusal_(static_cast<size_t>(n_)) {}

  void run();

 private:
  std::string name(int node) const {
    return fmt::format("node {} at {}", node, o_.peers[static_cast<size_t>(node)].toString());
  }
  size_t slot(int peer, int lane) const { return static_cast<size_t>(peer * lanes_ + lane); }
  bool peerUp(int peer) const;
  bool completeLocked() const TP_REQUIRES(mu_);
  void dialLoop(int peer, int lane);
  void acceptLoop(int listen_fd);
  // Starts a handshake thread for an accepted connection, or refuses it (caps, no threads).
  void startAccepted(Fd fd, const std::string& from);
  void acceptOne(Fd fd, std::string from, Nonce nonce, Handshaker* self);
  // Joins the handshake threads that are done (accept loop only); gives back what they freed,
  // at most once per kTrimInterval.
  void reapHandshakers();
  // Logs `message` (a problem with unauthenticated or resource-starved connections) at most
  // once per period, with the number of such events since the last line.
  void throttledWarn(LogLimiter& log, const std::string& message);
  // Runs the handshake with this side's fresh `nonce`; on success stores the socket and
  // returns true.
  bool handshake(std::unique_ptr<Transport> transport, int expected_peer, int lane,
                 const std::string& from, const Nonce& nonce);
  std::string admitLocked(int peer, int lane, const std::string& from) TP_REQUIRES(mu_);
  // Records the latest problem with `peer`; a refusal (its reason in `refusal`) is logged as
  // a warning the first time that reason is seen.
  void noteProblem(int peer, const std::string& problem, const std::string& refusal);

  const MeshOptions& o_;
  const TransportFactory& make_transport_;
  const LinkSink& sink_;
  const int n_;
  const int lanes_;
  const Clock::time_point start_;
  const Clock::time_point deadline_;

  Mutex mu_;
  CondVar cv_;
  bool stop_ TP_GUARDED_BY(mu_) = false;
  std::vector<std::string> in_flight_ TP_GUARDED_BY(mu_);       // from where a handshake runs
  std::vector<std::string> connected_from_ TP_GUARDED_BY(mu_);  // from where the link came
  int handshakes_running_ TP_GUARDED_BY(mu_) = 0;
  std::vector<int> handshake_fds_ TP_GUARDED_BY(mu_);  // sockets mid-handshake
  std::vector<std::string> problem_ TP_GUARDED_BY(mu_);
  std::vector<std::string> last_refusal_ TP_GUARDED_BY(mu_);
  std::list<Handshaker> handshakers_ TP_GUARDED_BY(mu_);
  std::map<std::string, int> per_source_ TP_GUARDED_BY(mu_);  // running handshakes by address
  Clock::time_point last_trim_{};                             // accept loop only
  LogLimiter unauthenticated_log_;                            // thread-safe
  LogLimiter overload_log_;                                   // thread-safe
};

bool Connector::peerUp(int peer) const {
  for (int lane = 0; lane < lanes_ && peer != o_.node_id; ++lane) {
    if (!sink_.up(peer, lane)) return false;
  }
  return true;
}

bool Connector::completeLocked() const {
  for (int peer = 0; peer < n_; ++peer) {
    if (!peerUp(peer)) return false;
  }
  return true;
}

void Connector::noteProblem(int peer, const std::string& problem, const std::string& refusal) {
  MutexLock lock(mu_);
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
  const size_t s = slot(peer, lane);
  const bool up = sink_.up(peer, lane);
  if (!in_flight_[s].empty() || up) {
    return fmt::format(
        "duplicate node id {}: node {} is already {} from {}; refusing the second node {} "
        "from {}",
        peer, peer, up ? "connected" : "connecting", up ? connected_from_[s] : in_flight_[s], peer,
        from);
  }
  in_flight_[s] = from;
  return {};
}

void Connector::throttledWarn(LogLimiter& log, const std::string& message) {
  if (auto held = log.pass()) spdlog::warn("[mesh] {}{}", message, heldBackNote(*held));
}

bool Connector::handshake(std::unique_ptr<Transport> t, int expected_peer, int lane,
                          const std::string& from, const Nonce& nonce) {
  HandshakeConfig config;
  config.node_id = o_.node_id;
  config.node_count = n_;
  config.lane = lane;
  config.lanes = lanes_;
  config.fingerprint = o_.fingerprint;
  config.fingerprint_text = o_.fingerprint_text;
  config.secret = o_.cluster_secret;
  config.expected_peer = expected_peer;
  if (t->hasPeerCertificate()) config.peer_cert_nodes = t->peerCertNodes();
  config.admit = [&](int peer, int peer_lane) {
    MutexLock lock(mu_);
    return admitLocked(peer, peer_lane, from);
  };
  Handshake hs(std::move(config), nonce);
  const auto started = Clock::now();
  const auto deadline = std::min(deadline_, started + kHandshakeTimeout);
  const auto pre_auth_deadline = std::min(deadline, started + kPreAuthTimeout);
  {
    MutexLock lock(mu_);
    if (stop_) return false;
    handshake_fds_.push_back(t->fd());
  }
  std::vector<uint8_t> payload;
  try {
    writeAll(*t, hs.start(), deadline);
    while (hs.state() != Handshake::State::kDone && hs.state() != Handshake::State::kFailed) {
      // An acceptor gives a peer that has not proved itself less time.
      const auto until = hs.state() == Handshake::State::kAwaitHello ? pre_auth_deadline : deadline;
      std::array<uint8_t, kFrameHeaderSize> header{};
      readFull(*t, header, until);
      std::vector<uint8_t> reply;
      try {
        FrameHeader h = decodeFrameHeader(header, 0);
        payload.resize(h.length);
        readFull(*t, payload, until);
        reply = hs.onFrame(h.type, payload);
      } catch (const Error& e) {
        reply = hs.abort(e);
      }
      if (!reply.empty()) writeAll(*t, reply, deadline);
    }
  } catch (const Error& e) {
    hs.abort(e);
  }
  {
    MutexLock lock(mu_);
    std::erase(handshake_fds_, t->fd());
  }
  const int peer = expected_peer >= 0 ? expected_peer : hs.claimedPeer();
  const std::string who = expected_peer >= 0 ? name(peer)
                          : peer >= 0 ? fmt::format("a peer claiming node {} (from {})", peer, from)
                                      : fmt::format("a peer connecting from {}", from);
  if (hs.state() == Handshake::State::kDone) {
    spdlog::debug("[mesh] {} connected (socket {}, from {})", name(peer), hs.lane(), from);
    sink_.adopt(EstablishedSocket{peer, hs.lane(), std::move(t)});
    {
      MutexLock lock(mu_);
      in_flight_[slot(peer, hs.lane())].clear();
      connected_from_[slot(peer, hs.lane())] = from;
    }
    cv_.notifyAll();
    return true;
  }
  if (hs.admitted()) {
    MutexLock lock(mu_);
    std::string& holder = in_flight_[slot(hs.claimedPeer(), hs.lane())];
    if (holder == from) holder.clear();
  }
  std::string message = hs.refusedByPeer() ? fmt::format("{} refused us: {}", who, hs.error())
                                           : fmt::format("refused {}: {}", who, hs.error());
  if (expected_peer < 0 && !hs.peerAuthenticated() && !o_.insecure) {
    // Anyone can connect: these lines must not flood the log.
    if (peer >= 0) {
      MutexLock lock(mu_);
      problem_[static_cast<size_t>(peer)] = message;
    }
    throttledWarn(unauthenticated_log_, message);
  } else if (peer >= 0) {
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
      MutexLock lock(mu_);
      if (stop_ || Clock::now() >= deadline_) return;
      if (sink_.up(peer, lane)) {  // connected: watch it in case it dies before we finish
        cv_.waitFor(mu_, kRecheck);
        backoff = std::chrono::milliseconds(100);
        continue;
      }
    }
    std::string why;
    Fd fd = connectOnce(address, std::chrono::milliseconds(1000), why);
    if (fd.valid()) {
      try {
        auto deadline = std::min(deadline_, Clock::now() + kHandshakeTimeout);
        if (o_.socket_buffer_bytes > 0) setBuffers(fd.get(), o_.socket_buffer_bytes);
        Nonce nonce{};
        randomBytes(nonce);
        if (handshake(make_transport_(std::move(fd), false, deadline), peer, lane,
                      address.toString(), nonce)) {
          continue;
        }
      } catch (const Error& e) {
        noteProblem(peer, fmt::format("{}: {}", name(peer), e.what()), e.what());
      }
      backoff = std::max(backoff, std::chrono::milliseconds(1000));
    } else {
      noteProblem(peer, why, {});
    }
    MutexLock lock(mu_);
    const auto until = Clock::now() + backoff;
    while (!stop_ && cv_.waitUntil(mu_, until)) {
    }
    backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
  }
}

void Connector::acceptOne(Fd fd, std::string from, Nonce nonce, Handshaker* self) {
  try {
    if (o_.socket_buffer_bytes > 0) setBuffers(fd.get(), o_.socket_buffer_bytes);
    auto deadline = std::min(deadline_, Clock::now() + kPreAuthTimeout);
    handshake(make_transport_(std::move(fd), true, deadline), -1, 0, from, nonce);
  } catch (const Error& e) {
    throttledWarn(unauthenticated_log_,
                  fmt::format("refused a connection from {}: {}", from, e.what()));
  }
  MutexLock lock(mu_);
  --handshakes_running_;
  if (--per_source_[sourceOf(from)] == 0) per_source_.erase(sourceOf(from));
  self->done = true;  // the last thing this thread touches
}

void Connector::reapHandshakers() {
  std::list<Handshaker> done;
  {
    MutexLock lock(mu_);
    for (auto it = handshakers_.begin(); it != handshakers_.end();) {
      auto next = std::next(it);
      if (it->done) done.splice(done.end(), handshakers_, it);
      it = next;
    }
  }
  for (auto& h : done) h.thread.join();
  if (!done.empty() && Clock::now() - last_trim_ >= kTrimInterval) {
    releaseFreedMemory();
    last_trim_ = Clock::now();
  }
}

void Connector::startAccepted(Fd fd, const std::string& from) {
  const std::string source = sourceOf(from);
  // Drawn here, on the accept loop's thread: OpenSSL keeps random generators per thread, and
  // each short-lived handshake thread would set up (and free) its own, about 5 KiB each.
  Nonce nonce{};
  randomBytes(nonce);
  std::string refused;
  {
    MutexLock lock(mu_);
    if (handshakes_running_ >= kMaxConcurrentHandshakes) {
      refused = fmt::format("closed a connection from {}: {} handshakes are running already", from,
                            handshakes_running_);
    } else if (per_source_[source] >= kMaxHandshakesPerSource) {
      refused =
          fmt::format("closed a connection from {}: {} handshakes from {} are running already",
                      from, per_source_[source], source);
    } else {
      auto& h = handshakers_.emplace_back();
      try {
        h.thread = std::thread([this, f = std::make_shared<Fd>(std::move(fd)), from, nonce,
                                p = &h] { acceptOne(std::move(*f), from, nonce, p); });
        ++handshakes_running_;
        ++per_source_[source];
        return;
      } catch (const std::system_error& e) {
        handshakers_.pop_back();
        refused =
            fmt::format("closed a connection from {}: cannot start a thread ({})", from, e.what());
      }
    }
    if (per_source_[source] == 0) per_source_.erase(source);
  }
  throttledWarn(overload_log_, refused);
}

void Connector::acceptLoop(int listen_fd) {
  for (;;) {
    reapHandshakers();
    {
      MutexLock lock(mu_);
      if (stop_ || Clock::now() >= deadline_) return;
    }
    pollfd p{listen_fd, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    std::string from;
    int error = 0;
    Fd fd = mesh::acceptOne(listen_fd, from, &error);
    if (!fd.valid()) {
      if (error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM) {
        // The connection stays queued; retrying at once would spin. Refuse nothing, wait.
        throttledWarn(overload_log_,
                      fmt::format("cannot accept a mesh connection: {}", std::strerror(error)));
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      continue;
    }
    startAccepted(std::move(fd), from);
  }
}

void Connector::run() {
  const int me = o_.node_id;
  Fd listener;
  if (me < n_ - 1) listener = listenOn(o_.listen ? *o_.listen : o_.peers[static_cast<size_t>(me)]);
  std::vector<std::thread> threads;
  for (int peer = 0; peer < me; ++peer) {
    for (int lane = 0; lane < lanes_; ++lane) {
      threads.emplace_back([=, this] { dialLoop(peer, lane); });
    }
  }
  if (listener.valid()) threads.emplace_back([&] { acceptLoop(listener.get()); });

  MutexLock lock(mu_);
  auto next_log = start_ + kFirstWaitingLog;
  auto cancelled = [&] { return o_.cancel != nullptr && o_.cancel->load(); };
  while (!completeLocked() && Clock::now() < deadline_ && !cancelled()) {
    // Wake at least every 250 ms to notice dead links and MeshOptions::cancel.
    cv_.waitUntil(mu_, std::min({next_log, deadline_, Clock::now() + kRecheck}));
    if (Clock::now() >= next_log) {
      for (int peer = 0; peer < n_; ++peer) {
        if (peerUp(peer)) continue;
        spdlog::info("[mesh] waiting for {}, {:.0f} s ({})", name(peer), secondsSince(start_),
                     problem_[static_cast<size_t>(peer)]);
      }
      next_log += kWaitingLogPeriod;
    }
  }
  const bool complete = completeLocked();
  stop_ = true;
  for (int fd : handshake_fds_) ::shutdown(fd, SHUT_RDWR);  // abort handshakes still running
  cv_.notifyAll();
  lock.unlock();
  for (auto& t : threads) t.join();
  lock.lock();
  auto handshakers = std::move(handshakers_);
  lock.unlock();
  for (auto& h : handshakers) h.thread.join();
  if (!handshakers.empty()) releaseFreedMemory();
  if (complete) return;
  if (cancelled()) {
    fail(ErrorCode::kAborted, "node {}: connecting to the mesh was cancelled (shutting down)", me);
  }
  lock.lock();  // the other threads have ended; problem_ is still guarded
  std::string missing;
  for (int peer = 0; peer < n_; ++peer) {
    if (peerUp(peer)) continue;
    if (!missing.empty()) missing += "; ";
    missing += fmt::format("{} (last: {})", name(peer), problem_[static_cast<size_t>(peer)]);
  }
  fail(ErrorCode::kTimeout, "node {} gave up after {:.0f} s (--connect-timeout) waiting for {}", me,
       secondsSince(start_), missing);
}

}  // namespace

void formLinks(const MeshOptions& options, const TransportFactory& make_transport,
               const LinkSink& sink) {
  Connector connector(options, make_transport, sink);
  connector.run();
}

}  // namespace tpnode::mesh
