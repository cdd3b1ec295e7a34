#include "mesh/link.h"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <cstring>

#include "common/byte_order.h"

namespace tpnode::mesh {

namespace {

constexpr int kPollSliceMs = 100;
constexpr size_t kStageBytes = 32 * 1024;
constexpr size_t kServiceReadBudget = size_t{1} << 20;  // per link per liveness tick

int64_t toNs(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
int64_t nowNs() {
  return toNs(Clock::now());
}

}  // namespace

// Releases the receive role on scope exit.
class Link::RoleGuard {
 public:
  explicit RoleGuard(Link& link) : link_(link) {}
  ~RoleGuard() { link_.releaseRole(); }
  RoleGuard(const RoleGuard&) = delete;
  RoleGuard& operator=(const RoleGuard&) = delete;

 private:
  Link& link_;
};

Link::Link(std::unique_ptr<Transport> transport, LinkOptions options, EventFn on_event)
    : transport_(std::move(transport)),
      options_(std::move(options)),
      on_event_(std::move(on_event)),
      last_rx_ns_(nowNs()),
      last_tx_ns_(nowNs()) {
  rx_.stage = std::make_unique_for_overwrite<std::byte[]>(kStageBytes);
}

Link::~Link() = default;

// ---- Receive role -----------------------------------------------------------------------------

bool Link::tryAcquireRole() {
  MutexLock lock(mu_);
  if (reader_active_) return false;
  reader_active_ = true;
  return true;
}

void Link::releaseRole() {
  MutexLock lock(mu_);
  reader_active_ = false;
  if (failed_.load() && filling_ != nullptr) {
    failOpLocked(*filling_);
    filling_ = nullptr;
  }
  cv_.notifyAll();
}

void Link::noteReceive() {
  last_rx_ns_.store(nowNs(), std::memory_order_relaxed);
}

bool Link::pump(const RecvOp* mine, bool block, size_t budget) {
  if (failed_.load(std::memory_order_acquire)) return false;
  try {
    return pumpFrames(mine, block, budget);
  } catch (const Error& e) {
    fail(ErrorCode::kPeerLost, e.what());
    return true;
  }
}

bool Link::pumpFrames(const RecvOp* mine, bool block, size_t budget) {
  bool progress = false;
  bool eof = false;
  size_t total = 0;
  // Small reads (a header, a short payload) go through the stage: one system call then
  // brings in a header and the payload behind it; large payloads are read in place.
  auto read = [&](void* buffer, size_t size) -> ssize_t {
    if (rx_.stage_pos == rx_.stage_len && size < kStageBytes) {
      ssize_t n = block ? transport_->readBlocking(rx_.stage.get(), kStageBytes)
                        : transport_->read(rx_.stage.get(), kStageBytes);
      block = false;
      if (n <= 0) return n;
      total += static_cast<size_t>(n);
      rx_.stage_pos = 0;
      rx_.stage_len = static_cast<size_t>(n);
    }
    if (rx_.stage_pos < rx_.stage_len) {
      size_t n = std::min(size, rx_.stage_len - rx_.stage_pos);
      std::memcpy(buffer, rx_.stage.get() + rx_.stage_pos, n);
      rx_.stage_pos += n;
      return static_cast<ssize_t>(n);
    }
    ssize_t n = block ? transport_->readBlocking(buffer, size) : transport_->read(buffer, size);
    block = false;
    if (n > 0) total += static_cast<size_t>(n);
    return n;
  };
  for (int frames = 0;
       frames < 256 && total < budget && !failed_.load(std::memory_order_acquire);) {
    if (!rx_.in_payload) {
      ssize_t n = read(rx_.header.data() + rx_.header_got, kFrameHeaderSize - rx_.header_got);
      if (n == Transport::kWouldBlock) return progress;
      progress = true;
      if (n == 0) {
        eof = true;
        break;
      }
      noteReceive();
      rx_.header_got += static_cast<size_t>(n);
      if (rx_.header_got < kFrameHeaderSize) continue;
      beginFrame();
      if (!rx_.in_payload) ++frames;
      continue;
    }
    ssize_t n = read(rx_.dest + rx_.got, rx_.h.length - rx_.got);
    if (n == Transport::kWouldBlock) return progress;
    progress = true;
    if (n == 0) {
      eof = true;
      break;
    }
    noteReceive();
    rx_.got += static_cast<size_t>(n);
    if (rx_.h.type == FrameType::kData) {
      bytes_received_.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
    }
    if (rx_.got == rx_.h.length) {
      const RecvOp* filled = rx_.to.op;
      finishFrame();
      ++frames;
      if (filled != nullptr && filled == mine) return true;
    }
  }
  if (!eof || failed_.load()) return progress;
  if (rx_.header_got == 0 && !rx_.in_payload && (got_goodbye_.load() || quiet_.load())) {
    fail(ErrorCode::kPeerLost, "it shut down", PeerEventKind::kClosed);
  } else {
    fail(ErrorCode::kPeerLost, "it closed the connection without GOODBYE (did the process die?)");
  }
  return true;
}

void Link::beginFrame() {
  rx_.h = decodeFrameHeader(rx_.header, options_.max_frame_bytes);
  rx_.header_got = 0;
  rx_.got = 0;
  rx_.to = {};
  rx_.dest = nullptr;
  switch (rx_.h.type) {
    case FrameType::kData: {
      if (rx_.h.seq != rx_.expected_seq) {
        tpnode::fail(ErrorCode::kInvalidData, "frame sequence {} where {} was expected", rx_.h.seq,
                     rx_.expected_seq);
      }
      ++rx_.expected_seq;
      {
        MutexLock lock(mu_);
        rx_.to = queues_.beginFrame(rx_.h.tag, rx_.h.length);
        filling_ = rx_.to.op;
      }
      if (!rx_.to.misfit.empty()) {
        fail(ErrorCode::kInvalidData, rx_.to.misfit);
        return;
      }
      rx_.dest = rx_.to.data;
      break;
    }
    case FrameType::kHeartbeat:
      rx_.dest = rx_.scratch.data();
      break;
    case FrameType::kGoodbye:
      got_goodbye_.store(true);
      if (!quiet_.load()) fail(ErrorCode::kPeerLost, "it shut down", PeerEventKind::kClosed);
      break;
    default:
      tpnode::fail(ErrorCode::kInvalidData, "unexpected {} frame after the handshake",
                   frameTypeName(rx_.h.type));
  }
  rx_.in_payload = rx_.h.length > 0;
  if (!rx_.in_payload) finishFrame();
}

void Link::finishFrame() {
  rx_.in_payload = false;
  if (rx_.h.type != FrameType::kData) return;
  frames_received_.fetch_add(1, std::memory_order_relaxed);
  MutexLock lock(mu_);
  queues_.finishFrame(rx_.to, rx_.h.length);
  if (rx_.to.op != nullptr) filling_ = nullptr;
  rx_.to = {};
  cv_.notifyAll();
}

template <typename Done>
void Link::readUntil(Done done_locked, Clock::time_point deadline, const RecvOp* mine) {
  // A plain socket can sleep inside recv() itself: one system call instead of poll() + recv().
  const bool can_block = transport_->canBlock() && deadline == Clock::time_point::max();
  const bool spin = options_.spin.count() > 0;
  auto spin_until = Clock::now() + options_.spin;
  for (;;) {
    const bool block = can_block && (!spin || Clock::now() >= spin_until);
    bool progress = pump(mine, block);
    {
      MutexLock lock(mu_);
      if (failed_.load() || done_locked()) return;
    }
    if (progress || transport_->hasBuffered()) {
      if (spin) spin_until = Clock::now() + options_.spin;
      continue;
    }
    if (block) continue;  // the read timed out (100 ms): look at the flags again
    auto now = Clock::now();
    if (now >= deadline) return;
    if (now < spin_until) {
      // Yield rather than pause: with more busy threads than cores a pause-spin holds the core
      // the sender needs; sched_yield on an idle core returns at once.
      sched_yield();
      continue;
    }
    if (can_block) continue;
    pollfd p{transport_->fd(), POLLIN, 0};
    ::poll(&p, 1, kPollSliceMs);
  }
}

// ---- Posted receives -------------------------------------------------------------------------

void Link::failOpLocked(RecvOp& op) {
  TagQueues::failOp(op, fail_code_, fail_reason_);
}

void Link::failAllLocked() {
  queues_.failAll(fail_code_, fail_reason_, /*serve_parked=*/closed_by_peer_);
  if (!reader_active_ && filling_ != nullptr) {
    failOpLocked(*filling_);
    filling_ = nullptr;
  }
}

void Link::serveClaimsLocked(uint32_t tag) {
  for (;;) {
    TagQueues::Served served = queues_.serveClaims(tag);
    if (served.misfit != nullptr) {
      mu_.unlock();
      fail(ErrorCode::kInvalidData, served.reason);
      mu_.lock();
      failOpLocked(*served.misfit);
    }
    if (served.changed) cv_.notifyAll();
    if (served.misfit == nullptr) return;
  }
}

void Link::post(RecvOp& op, uint32_t tag, std::span<std::byte> out) {
  op.tag = tag;
  op.out = out;
  op.size = 0;
  op.failed = false;
  op.next = nullptr;
  MutexLock lock(mu_);
  if (failed_.load()) {
    if (closed_by_peer_) {
      // What the peer sent before its GOODBYE is parked here: still the receiver's.
      queues_.post(op);
      if (op.state == RecvOp::State::kClaiming) serveClaimsLocked(tag);
      if (op.state == RecvOp::State::kDone) return;
      queues_.cancel(op);
    }
    failOpLocked(op);
    return;
  }
  queues_.post(op);
}

size_t Link::wait(RecvOp& op) {
  MutexLock lock(mu_);
  for (;;) {
    if (op.state == RecvOp::State::kClaiming) serveClaimsLocked(op.tag);
    if (op.state == RecvOp::State::kDone) break;
    if (!reader_active_) {
      reader_active_ = true;
      lock.unlock();
      {
        RoleGuard guard(*this);
        readUntil(
            [&] {
              mu_.assertHeld();  // readUntil() calls it under mu_
              return queues_.servable(op);
            },
            Clock::time_point::max(), &op);
      }
      lock.lock();
      continue;
    }
    cv_.wait(mu_);
  }
  if (op.failed) throw Error(op.error_code, op.error);
  return op.size;
}

bool Link::test(RecvOp& op) {
  {
    MutexLock lock(mu_);
    if (op.state == RecvOp::State::kClaiming) serveClaimsLocked(op.tag);
    if (op.state == RecvOp::State::kDone) return true;
  }
  if (tryAcquireRole()) {
    RoleGuard guard(*this);
    pump();
  }
  MutexLock lock(mu_);
  if (op.state == RecvOp::State::kClaiming) serveClaimsLocked(op.tag);
  return op.state == RecvOp::State::kDone;
}

void Link::cancel(RecvOp& op) {
  {
    MutexLock lock(mu_);
    if (op.state != RecvOp::State::kFilling) {
      queues_.cancel(op);
      return;
    }
  }
  try {
    wait(op);
  } catch (const Error&) {
  }
}

size_t Link::recv(uint32_t tag, std::span<std::byte> out) {
  RecvOp op;
  post(op, tag, out);
  return wait(op);
}

// ---- Send ------------------------------------------------------------------------------------

void Link::writeFrame(const FrameHeader& header, std::span<const std::byte> payload,
                      Clock::time_point deadline) {
  encodeFrameHeader(header, tx_header_);
  iovec iov[2] = {{tx_header_.data(), kFrameHeaderSize},
                  {const_cast<std::byte*>(payload.data()), payload.size()}};
  int first = 0;
  const int count = payload.empty() ? 1 : 2;
  std::vector<pollfd> wait_fds;  // only filled when the socket is full
  bool role = false;
  struct RoleRelease {
    Link* link;
    bool* held;
    ~RoleRelease() {
      if (*held) link->releaseRole();
    }
  } release{this, &role};
  for (;;) {
    if (failed_.load(std::memory_order_acquire)) throwFailure();
    ssize_t n = transport_->writev(iov + first, count - first);
    if (n > 0) {
      size_t left = static_cast<size_t>(n);
      while (first < count && left >= iov[first].iov_len) {
        left -= iov[first].iov_len;
        ++first;
      }
      if (first == count) break;
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
      continue;
    }
    // The socket is full: drain incoming frames while we wait, here and on the other links,
    // so that crossing sends and rings of sends keep flowing.
    if (!role) role = tryAcquireRole();
    if (role && pump()) continue;
    if (group_ != nullptr && group_->drainOthers(this)) continue;
    if (Clock::now() >= deadline) {
      tpnode::fail(ErrorCode::kTimeout, "it stopped reading (a {} frame could not be sent)",
                   frameTypeName(header.type));
    }
    wait_fds.clear();
    wait_fds.push_back({transport_->fd(), static_cast<short>(POLLOUT | (role ? POLLIN : 0)), 0});
    if (group_ != nullptr) group_->pollOthers(this, wait_fds);
    ::poll(wait_fds.data(), wait_fds.size(), kPollSliceMs);
  }
  last_tx_ns_.store(nowNs(), std::memory_order_relaxed);
}

void Link::send(uint32_t tag, std::span<const std::byte> data) {
  if (data.size() > options_.max_frame_bytes) {
    tpnode::fail(ErrorCode::kInvalidArgument,
                 "a message of {} bytes to {} exceeds the frame limit of {} bytes", data.size(),
                 options_.peer_name, options_.max_frame_bytes);
  }
  MutexLock send_lock(send_mu_);
  if (failed_.load(std::memory_order_acquire)) throwFailure();
  FrameHeader h{FrameType::kData, tag, send_seq_++, data.size()};
  try {
    writeFrame(h, data, Clock::time_point::max());
  } catch (const Error& e) {
    fail(ErrorCode::kPeerLost, e.what());
    throwFailure();
  }
  frames_sent_.fetch_add(1, std::memory_order_relaxed);
  bytes_sent_.fetch_add(data.size(), std::memory_order_relaxed);
}

// ---- Liveness and shutdown -------------------------------------------------------------------

void Link::service(Clock::time_point now) {
  if (failed_.load()) return;
  if (tryAcquireRole()) {
    RoleGuard guard(*this);
    pump(nullptr, false, kServiceReadBudget);
  }
  if (failed_.load()) return;
  const int64_t now_ns = toNs(now);
  const int64_t interval = std::chrono::nanoseconds(options_.heartbeat_interval).count();
  if (now_ns - last_tx_ns_.load(std::memory_order_relaxed) >= interval && send_mu_.tryLock()) {
    MutexLock send_lock(send_mu_, std::adopt_lock);
    std::array<std::byte, kHeartbeatPayload> payload{};
    storeLE64(reinterpret_cast<uint8_t*>(payload.data()), static_cast<uint64_t>(now_ns / 1000));
    try {
      writeFrame(FrameHeader{FrameType::kHeartbeat, 0, 0, kHeartbeatPayload}, payload,
                 now + options_.liveness_timeout);
    } catch (const Error& e) {
      fail(ErrorCode::kPeerLost, e.what());
      return;
    }
  }
  const int64_t silent_ns = nowNs() - last_rx_ns_.load(std::memory_order_relaxed);
  if (silent_ns > std::chrono::nanoseconds(options_.liveness_timeout).count()) {
    fail(ErrorCode::kPeerLost,
         fmt::format("it has been silent for {:.1f} s (liveness timeout {:.1f} s)",
                     static_cast<double>(silent_ns) / 1e9,
                     static_cast<double>(options_.liveness_timeout.count()) / 1e3));
  }
}

bool Link::drain() {
  if (failed_.load() || !tryAcquireRole()) return false;
  RoleGuard guard(*this);
  return pump(nullptr, false, kServiceReadBudget * 4);
}

void Link::noticeHangup() {
  if (failed_.load()) return;
  pollfd p{transport_->fd(), POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0 || (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) == 0) return;
  if (tryAcquireRole()) {
    RoleGuard guard(*this);
    pump(nullptr, false, kServiceReadBudget);
  }
}

void Link::sayGoodbye(Clock::time_point deadline) {
  if (failed_.load()) return;
  MutexLock send_lock(send_mu_);
  try {
    writeFrame(FrameHeader{FrameType::kGoodbye, 0, 0, 0}, {}, deadline);
    transport_->shutdownWrite();
  } catch (const Error&) {
    // The peer is gone already; nothing to say goodbye to.
  }
}

void Link::drainUntilClosed(Clock::time_point deadline) {
  {
    MutexLock lock(mu_);
    while (reader_active_ && !failed_.load()) {
      if (!cv_.waitUntil(mu_, deadline)) return;
    }
    if (failed_.load()) return;
    reader_active_ = true;
  }
  RoleGuard guard(*this);
  readUntil([&] { return got_goodbye_.load(); }, deadline);
}

void Link::fail(ErrorCode code, const std::string& reason, PeerEventKind kind) {
  {
    MutexLock lock(mu_);
    if (failed_.load()) return;
    fail_code_ = code;
    fail_reason_ = options_.peer_name + ": " + reason;
    closed_by_peer_ = kind == PeerEventKind::kClosed && !quiet_.load();
    failed_.store(true, std::memory_order_release);
    failAllLocked();
    cv_.notifyAll();
  }
  transport_->shutdownBoth();
  if (!quiet_.load() && on_event_) on_event_(kind, reason);
}

void Link::throwFailure() const {
  MutexLock lock(mu_);
  throw Error(fail_code_, fail_reason_);
}

LinkStats Link::stats() const {
  LinkStats s;
  s.peer = options_.peer;
  s.bytes_sent = bytes_sent_.load();
  s.bytes_received = bytes_received_.load();
  s.frames_sent = frames_sent_.load();
  s.frames_received = frames_received_.load();
  return s;
}

}  // namespace tpnode::mesh
