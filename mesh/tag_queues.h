// The receive queues of one Link, by tag: receives posted before their frame arrives, frames
// that arrive before their receive ("parked"), and receives posted while frames were parked
// ("claims"). Link decides who reads the socket; this class decides where each DATA frame goes
// and which receive gets which message.
//
// Contract
// - Ordering: per tag, messages are delivered to receives in the order the frames arrived
//   (= the order the peer sent them on this link) and receives are matched in the order they
//   were posted. A receive posted while frames of its tag are parked, or while earlier claims
//   wait, becomes a claim: claims take the parked frames first-come first-served, and join the
//   posted list once nothing is parked, so a later receive never overtakes an earlier one.
//   Tags are independent of each other.
// - Threads: not thread-safe. The owning Link calls everything under its mutex
//   (TP_GUARDED_BY). The receive-role holder calls beginFrame()/finishFrame(); the caller
//   threads call post()/serveClaims()/servable()/cancel(). Between beginFrame() and
//   finishFrame() the reader fills the returned destination without the mutex: the op is
//   kFilling (no list holds it) or the parked buffer is not ready (serveClaims() stops at it).
// - Limits: a message is never written past a receive's buffer: a frame larger than the
//   posted receive, or a parked message larger than the claiming receive, is reported to the
//   owner (who fails the link with kInvalidData). Each frame is at most the link's
//   max_frame_bytes (checked before beginFrame()), but parked frames have no count or byte
//   limit: a peer that sends far ahead of the receives grows the ParkedPool.
// - Lifetime: RecvOps are owned by the callers and must stay alive until kDone or cancel().
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>

#include "common/error.h"
#include "mesh/parked_pool.h"

namespace tpnode::mesh {

// A posted receive. Lives on the stack of Link::recv() or inside an irecv Request.
struct RecvOp {
  enum class State { kNew, kClaiming, kPosted, kFilling, kDone };
  uint32_t tag = 0;
  std::span<std::byte> out;
  State state = State::kNew;
  size_t size = 0;
  bool failed = false;
  ErrorCode error_code = ErrorCode::kInternal;
  std::string error;
  RecvOp* next = nullptr;
};

class TagQueues {
 public:
  // Where the reader writes the payload of a DATA frame: into a posted receive (op) or a
  // parked buffer. `misfit` is set, and nothing queued, when the frame is larger than the
  // receive at the head of the posted list.
  struct Destination {
    RecvOp* op = nullptr;
    ParkedBuffer* parked = nullptr;
    std::byte* data = nullptr;
    std::string misfit;
  };
  // What serveClaims() did: `changed` when some receive changed state (wake its waiter);
  // `misfit` is a claim removed from the queue whose message did not fit (its frame is
  // dropped): the owner fails the link, then the op.
  struct Served {
    bool changed = false;
    RecvOp* misfit = nullptr;
    std::string reason;
  };

  TagQueues() = default;
  TagQueues(const TagQueues&) = delete;
  TagQueues& operator=(const TagQueues&) = delete;

  // Queues `op` (op.tag and op.out set, not failed): kClaiming if frames or claims of its tag
  // are waiting, else kPosted.
  void post(RecvOp& op);
  // Serves the claims of `tag` in post order from the parked frames, up to the first parked
  // frame that is still being read; claims left with nothing parked become posted receives.
  Served serveClaims(uint32_t tag);
  // True when a waiter for `op` needs no more bytes from the socket: it is done, or it is a
  // claim and the parked frame at the head of its tag is complete (or gone).
  bool servable(const RecvOp& op) const;
  // Takes a kClaiming or kPosted op out of its queue and marks it kDone (size 0). Not for a
  // kFilling op: the reader owns it until finishFrame().
  void cancel(RecvOp& op);

  // Reader: a DATA frame of `length` bytes on `tag` begins.
  Destination beginFrame(uint32_t tag, size_t length);
  // Reader: its payload is complete; the op becomes kDone or the parked buffer ready.
  void finishFrame(const Destination& dest, size_t length);

  // Fails every claiming and posted receive (not the one being filled). With `serve_parked`
  // (the peer closed in order) claims first take the complete frames parked for them; one whose
  // message does not fit fails with kInvalidData.
  void failAll(ErrorCode code, const std::string& reason, bool serve_parked = false);
  static void failOp(RecvOp& op, ErrorCode code, const std::string& reason);

  // Parked frames of `tag` (complete or not); for tests and stats.
  size_t parkedCount(uint32_t tag) const;

 private:
  struct Queue {
    RecvOp* posted_head = nullptr;
    RecvOp* posted_tail = nullptr;
    RecvOp* claim_head = nullptr;
    RecvOp* claim_tail = nullptr;
    ParkedBuffer* parked_head = nullptr;
    ParkedBuffer* parked_tail = nullptr;
  };
  static void appendPosted(Queue& q, RecvOp& op);

  std::unordered_map<uint32_t, Queue> queues_;
  ParkedPool pool_;
};

}  // namespace tpnode::mesh
