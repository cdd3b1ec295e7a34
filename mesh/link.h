// One established, authenticated socket to a peer: framing, ordered tagged messages, parking
// of early arrivals, heartbeats and failure. TcpMesh holds `sockets_per_peer` Links per peer.
//
// Contract
// - Threads: send/recv/post/wait/test from any number of caller threads; service() from the
//   liveness thread; abort()/failure from any thread. Caller threads do the socket I/O
//   themselves (no hand-off to an I/O thread):
//   * the receive role: at most one thread at a time reads frames from the socket. Whoever
//     holds it decodes frames; a DATA frame whose receive is posted is read straight into the
//     receiver's buffer, any other is parked in a pooled buffer by tag. A receiver waits for
//     the role (condition variable) or for another reader to fill its buffer.
//   * the send lock: one frame is written at a time with writev(header, payload), from the
//     caller's buffer (no copy). While the socket is full, the sender takes the receive role if
//     it is free and drains incoming frames, here and on the other links of its LinkGroup, so
//     two nodes sending to each other, or a ring of nodes, never deadlock.
//   * the liveness thread only ever try-locks: it drains and heartbeats idle links and never
//     waits for compute.
// - Ordering: DATA frames on one link are delivered per tag in the order sent, to receives in
//   the order posted (the per-tag queues: mesh/tag_queues.h).
// - Received bytes are hostile: a bad header, sequence number or size fails the link with a
//   reason (ErrorCode::kInvalidData); it never aborts and never allocates more than
//   max_frame_bytes for one frame.
// - Failure: the first failure is stored; every pending and later operation throws
//   Error(kPeerLost) (kAborted after abort()) naming the peer and the reason; `on_event` is
//   called once, unless the link is quiet (shutting down). Except after the peer's GOODBYE
//   (PeerEventKind::kClosed): the frames that came before it stay receivable, and only a
//   receive that finds none of its tag parked throws.
// - Lifetime: a Link outlives every operation on it (TcpMesh destroys links after its users).
#pragma once

#include <poll.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/mutex.h"
#include "mesh/frame.h"
#include "mesh/mesh.h"
#include "mesh/tag_queues.h"
#include "mesh/transport.h"

namespace tpnode::mesh {

struct LinkOptions {
  int peer = -1;
  int lane = 0;
  std::string peer_name;  // "node 2 at b:9500", used in every message about this link
  uint64_t max_frame_bytes = uint64_t{1} << 30;
  std::chrono::microseconds spin{50};
  std::chrono::milliseconds heartbeat_interval{500};
  std::chrono::milliseconds liveness_timeout{5000};
};

class Link;

// The other links of the same mesh, for a sender whose socket is full: it drains them while it
// waits, so that a ring of large blocking sends (each node sends right, then receives from the
// left) keeps flowing. Implemented by TcpMesh; outlives its links.
class LinkGroup {
 public:
  virtual ~LinkGroup() = default;
  // Drains, without blocking, every other link whose receive role is free; true if any byte
  // was read.
  virtual bool drainOthers(const Link* self) = 0;
  // Appends {fd, POLLIN} of every other link.
  virtual void pollOthers(const Link* self, std::vector<struct pollfd>& out) = 0;
};

class Link {
 public:
  using EventFn = std::function<void(PeerEventKind kind, const std::string& reason)>;

  Link(std::unique_ptr<Transport> transport, LinkOptions options, EventFn on_event);
  ~Link();
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  void send(uint32_t tag, std::span<const std::byte> data) TP_EXCLUDES(send_mu_);
  size_t recv(uint32_t tag, std::span<std::byte> out) TP_EXCLUDES(mu_);

  // Asynchronous receive: post() registers `op` (it must stay alive until wait() returns or
  // cancel() is called); wait() blocks until it is filled; test() makes progress without
  // blocking and says whether it is done.
  void post(RecvOp& op, uint32_t tag, std::span<std::byte> out) TP_EXCLUDES(mu_);
  size_t wait(RecvOp& op) TP_EXCLUDES(mu_);
  bool test(RecvOp& op) TP_EXCLUDES(mu_);
  void cancel(RecvOp& op) TP_EXCLUDES(mu_);

  // Liveness thread: drain if nobody reads, heartbeat if idle, fail if silent.
  void service(Clock::time_point now) TP_EXCLUDES(mu_, send_mu_);
  // Non-blocking: reads what is there if the receive role is free (see LinkGroup).
  bool drain();
  int fd() const { return transport_->fd(); }
  // Set once, before the link is used by anyone but the liveness thread.
  void setGroup(LinkGroup* group) { group_ = group; }

  // Setup: if the peer has hung up, read up to the end of the stream now (failing the link)
  // instead of at the next liveness tick. Never blocks.
  void noticeHangup();

  // Shutdown: GOODBYE and half-close, then read until the peer's GOODBYE or end of stream.
  void setQuiet() { quiet_.store(true); }
  void sayGoodbye(Clock::time_point deadline) TP_EXCLUDES(send_mu_);
  void drainUntilClosed(Clock::time_point deadline) TP_EXCLUDES(mu_);
  // Fails the link (idempotent): pending and later operations throw `code`.
  void fail(ErrorCode code, const std::string& reason, PeerEventKind kind = PeerEventKind::kLost)
      TP_EXCLUDES(mu_);

  bool alive() const { return !failed_.load(std::memory_order_acquire); }
  LinkStats stats() const;
  const std::string& peerName() const { return options_.peer_name; }

 private:
  // The receive state of the frame being read; touched only by the receive-role holder.
  struct Rx {
    std::array<uint8_t, kFrameHeaderSize> header{};
    size_t header_got = 0;
    bool in_payload = false;
    FrameHeader h;
    std::byte* dest = nullptr;  // where the payload goes
    size_t got = 0;
    TagQueues::Destination to;  // of a DATA frame
    std::array<std::byte, kHeartbeatPayload> scratch{};
    uint64_t expected_seq = 0;
    std::unique_ptr<std::byte[]> stage;  // bytes read ahead: [stage_pos, stage_len)
    size_t stage_pos = 0;
    size_t stage_len = 0;
  };
  class RoleGuard;

  bool tryAcquireRole() TP_EXCLUDES(mu_);
  void releaseRole() TP_EXCLUDES(mu_);
  // Needs the role. Reads what is available without blocking (or, with `block`, waits up to the
  // transport's read timeout for the first bytes) and dispatches complete frames; returns early
  // once `mine` is filled. True when any byte was read. Fails the link on errors.
  // `budget` bounds the bytes read by one call (the liveness thread must not get stuck
  // draining a long stream).
  bool pump(const RecvOp* mine = nullptr, bool block = false, size_t budget = SIZE_MAX);
  bool pumpFrames(const RecvOp* mine, bool block, size_t budget);
  void beginFrame() TP_EXCLUDES(mu_);
  void finishFrame() TP_EXCLUDES(mu_);
  // Holds the role; pumps, spins, then polls until done_locked() (called under mu_), failure
  // or the deadline.
  template <typename Done>
  void readUntil(Done done_locked, Clock::time_point deadline, const RecvOp* mine = nullptr)
      TP_EXCLUDES(mu_);
  void writeFrame(const FrameHeader& header, std::span<const std::byte> payload,
                  Clock::time_point deadline) TP_REQUIRES(send_mu_);
  // Serves the claims of `tag`; a claim whose message does not fit fails the link (mu_ is
  // released meanwhile).
  void serveClaimsLocked(uint32_t tag) TP_REQUIRES(mu_);
  void failOpLocked(RecvOp& op) TP_REQUIRES(mu_);
  void failAllLocked() TP_REQUIRES(mu_);
  [[noreturn]] void throwFailure() const TP_EXCLUDES(mu_);
  void noteReceive();

  std::unique_ptr<Transport> transport_;
  const LinkOptions options_;
  LinkGroup* group_ = nullptr;  // the mesh that owns this link, or none
  EventFn on_event_;

  mutable Mutex mu_;
  CondVar cv_;
  bool reader_active_ TP_GUARDED_BY(mu_) = false;
  TagQueues queues_ TP_GUARDED_BY(mu_);
  RecvOp* filling_ TP_GUARDED_BY(mu_) = nullptr;  // the op the reader is writing into
  ErrorCode fail_code_ TP_GUARDED_BY(mu_) = ErrorCode::kPeerLost;
  std::string fail_reason_ TP_GUARDED_BY(mu_);
  bool closed_by_peer_ TP_GUARDED_BY(mu_) = false;  // failed by the peer's GOODBYE
  std::atomic<bool> failed_{false};
  std::atomic<bool> quiet_{false};
  std::atomic<bool> got_goodbye_{false};

  Rx rx_;  // receive-role holder only

  Mutex send_mu_;
  uint64_t send_seq_ TP_GUARDED_BY(send_mu_) = 0;
  std::array<uint8_t, kFrameHeaderSize> tx_header_ TP_GUARDED_BY(send_mu_){};

  std::atomic<int64_t> last_rx_ns_;
  std::atomic<int64_t> last_tx_ns_;
  std::atomic<uint64_t> bytes_sent_{0}, bytes_received_{0}, frames_sent_{0}, frames_received_{0};
};

}  // namespace tpnode::mesh
