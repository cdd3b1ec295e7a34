#include "mesh/tag_queues.h"

#include <cstring>

#include <fmt/format.h>

namespace tpnode::mesh {

namespace {

// Removes `op` from the intrusive list [head, tail] (linked through RecvOp::next) if it is there.
void unlinkOp(RecvOp*& head, RecvOp*& tail, RecvOp& op) {
  RecvOp* prev = nullptr;
  for (RecvOp* cur = head; cur != nullptr; prev = cur, cur = cur->next) {
    if (cur != &op) continue;
    (prev != nullptr ? prev->next : head) = cur->next;
    if (tail == cur) tail = prev;
    return;
  }
}

std::string misfitReason(size_t size, uint32_t tag, size_t capacity) {
  return fmt::format("a message of {} bytes on tag {} does not fit the {}-byte receive buffer",
                     size, tag, capacity);
}

}  // namespace

void TagQueues::appendPosted(Queue& q, RecvOp& op) {
  op.state = RecvOp::State::kPosted;
  op.next = nullptr;
  (q.posted_tail != nullptr ? q.posted_tail->next : q.posted_head) = &op;
  q.posted_tail = &op;
}

void TagQueues::post(RecvOp& op) {
  Queue& q = queues_[op.tag];
  if (q.parked_head == nullptr && q.claim_head == nullptr) {
    appendPosted(q, op);
    return;
  }
  op.state = RecvOp::State::kClaiming;
  op.next = nullptr;
  (q.claim_tail != nullptr ? q.claim_tail->next : q.claim_head) = &op;
  q.claim_tail = &op;
}

TagQueues::Served TagQueues::serveClaims(uint32_t tag) {
  Served served;
  Queue& q = queues_[tag];
  while (q.claim_head != nullptr) {
    RecvOp& op = *q.claim_head;
    ParkedBuffer* p = q.parked_head;
    if (p != nullptr && !p->ready) break;  // the reader is still filling it
    q.claim_head = op.next;
    if (q.claim_head == nullptr) q.claim_tail = nullptr;
    op.next = nullptr;
    served.changed = true;
    if (p == nullptr) {  // nothing parked any more: wait in line for the next frames
      appendPosted(q, op);
      continue;
    }
    q.parked_head = p->next;
    if (q.parked_head == nullptr) q.parked_tail = nullptr;
    if (p->size > op.out.size()) {
      served.misfit = &op;
      served.reason = misfitReason(p->size, tag, op.out.size());
      pool_.recycle(p);
      break;
    }
    if (p->size > 0) std::memcpy(op.out.data(), p->data.get(), p->size);
    op.size = p->size;
    op.state = RecvOp::State::kDone;
    pool_.recycle(p);
  }
  return served;
}

bool TagQueues::servable(const RecvOp& op) const {
  if (op.state == RecvOp::State::kDone) return true;
  if (op.state != RecvOp::State::kClaiming) return false;
  auto it = queues_.find(op.tag);
  if (it == queues_.end()) return true;
  const ParkedBuffer* head = it->second.parked_head;
  return head == nullptr || head->ready;
}

void TagQueues::cancel(RecvOp& op) {
  auto it = queues_.find(op.tag);
  if (it != queues_.end()) {
    Queue& q = it->second;
    if (op.state == RecvOp::State::kClaiming) unlinkOp(q.claim_head, q.claim_tail, op);
    if (op.state == RecvOp::State::kPosted) unlinkOp(q.posted_head, q.posted_tail, op);
  }
  op.state = RecvOp::State::kDone;
}

TagQueues::Destination TagQueues::beginFrame(uint32_t tag, size_t length) {
  Destination dest;
  Queue& q = queues_[tag];
  if (q.parked_head == nullptr && q.posted_head != nullptr) {
    RecvOp* op = q.posted_head;
    if (op->out.size() < length) {
      dest.misfit = misfitReason(length, tag, op->out.size());
      return dest;
    }
    q.posted_head = op->next;
    if (q.posted_head == nullptr) q.posted_tail = nullptr;
    op->next = nullptr;
    op->state = RecvOp::State::kFilling;
    dest.op = op;
    dest.data = op->out.data();
    return dest;
  }
  ParkedBuffer* p = pool_.take(length);
  (q.parked_tail != nullptr ? q.parked_tail->next : q.parked_head) = p;
  q.parked_tail = p;
  dest.parked = p;
  dest.data = p->data.get();
  return dest;
}

void TagQueues::finishFrame(const Destination& dest, size_t length) {
  if (dest.op != nullptr) {
    dest.op->size = length;
    dest.op->state = RecvOp::State::kDone;
  } else if (dest.parked != nullptr) {
    dest.parked->size = length;
    dest.parked->ready = true;
  }
}

void TagQueues::failOp(RecvOp& op, ErrorCode code, const std::string& reason) {
  op.failed = true;
  op.error_code = code;
  op.error = reason;
  op.state = RecvOp::State::kDone;
}

void TagQueues::failAll(ErrorCode code, const std::string& reason, bool serve_parked) {
  for (auto& [tag, q] : queues_) {
    while (serve_parked) {
      Served served = serveClaims(tag);
      if (served.misfit == nullptr) break;
      failOp(*served.misfit, ErrorCode::kInvalidData, served.reason);
    }
    for (RecvOp* list : {q.claim_head, q.posted_head}) {
      for (RecvOp* op = list; op != nullptr;) {
        RecvOp* next = op->next;
        failOp(*op, code, reason);
        op = next;
      }
    }
    q.claim_head = q.claim_tail = nullptr;
    q.posted_head = q.posted_tail = nullptr;
  }
}

size_t TagQueues::parkedCount(uint32_t tag) const {
  auto it = queues_.find(tag);
  if (it == queues_.end()) return 0;
  size_t n = 0;
  for (const ParkedBuffer* p = it->second.parked_head; p != nullptr; p = p->next) ++n;
  return n;
}

}  // namespace tpnode::mesh
