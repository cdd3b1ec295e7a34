#include "node/scheduler.h"

#include <algorithm>

#include "common/check.h"

namespace tpnode::node {

Scheduler::Scheduler(SchedulerOptions options)
    : options_(options), slot_used_(static_cast<size_t>(options.slots), false) {
  TP_CHECK(options_.slots > 0 && options_.max_step_tokens > 0 && options_.prefill_chunk > 0 &&
           options_.groups > 0);
}

Sequence* Scheduler::add(uint64_t id, std::vector<int32_t> prompt, int max_new_tokens) {
  TP_CHECK(!prompt.empty() && static_cast<int>(prompt.size()) < options_.ctx_size,
           "prompt of {} tokens, context {}", prompt.size(), options_.ctx_size);
  auto seq = std::make_unique<Sequence>();
  seq->id = id;
  seq->n_prompt = prompt.size();
  seq->tokens = std::move(prompt);
  seq->max_new_tokens = max_new_tokens;
  Sequence* raw = seq.get();
  waiting_.push_back(std::move(seq));
  return raw;
}

void Scheduler::cancel(uint64_t id) {
  for (auto& s : waiting_) s->cancelled |= s->id == id;
  for (auto& s : running_) s->cancelled |= s->id == id;
}

int Scheduler::freeSlots() const {
  return static_cast<int>(std::count(slot_used_.begin(), slot_used_.end(), false));
}

PlannedStep Scheduler::plan(std::vector<std::unique_ptr<Sequence>>& removed) {
  // 1. Leave: finished and cancelled sequences free their slots (once no step of theirs is in
  // flight: its result still comes back to them).
  for (auto it = running_.begin(); it != running_.end();) {
    if (((*it)->finished || (*it)->cancelled) && !(*it)->inFlight()) {
      slot_used_[static_cast<size_t>((*it)->slot)] = false;
      pending_clear_.push_back(static_cast<uint32_t>((*it)->slot));
      removed.push_back(std::move(*it));
      it = running_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if ((*it)->cancelled) {
      removed.push_back(std::move(*it));
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
  // 2. Join: admit waiting sequences into free slots, FIFO.
  while (!waiting_.empty() && freeSlots() > 0) {
    auto free_it = std::find(slot_used_.begin(), slot_used_.end(), false);
    auto seq = std::move(waiting_.front());
    waiting_.pop_front();
    seq->slot = static_cast<int>(free_it - slot_used_.begin());
    *free_it = true;
    running_.push_back(std::move(seq));
  }
  // 3. Plan: decodes first (one token each, at most a group's share), then prefill chunks
  // within the token budget. Only tokens not yet issued are planned.
  PlannedStep step;
  step.command.kind = StepKind::kStep;
  step.command.step_id = next_step_id_++;
  step.command.clear_slots = std::move(pending_clear_);
  pending_clear_.clear();
  int budget = options_.max_step_tokens;
  auto take = [&](Sequence* s, size_t n) {
    SeqChunk chunk;
    chunk.slot = static_cast<uint32_t>(s->slot);
    chunk.start_pos = static_cast<uint32_t>(s->n_issued);
    chunk.tokens.assign(s->tokens.begin() + static_cast<std::ptrdiff_t>(s->n_issued),
                        s->tokens.begin() + static_cast<std::ptrdiff_t>(s->n_issued + n));
    step.command.seqs.push_back(std::move(chunk));
    step.participants.push_back(s);
    s->n_issued += n;
    if (s->n_issued == s->tokens.size()) {
      step.sampled.push_back(s);
      step.command.seqs.back().flags |= kLogitsLast;
    }
    if (s->all_logits) step.command.seqs.back().flags |= kLogitsAll;
    budget -= static_cast<int>(n);
  };
  auto pending = [](const Sequence& s) {
    return s.finished || s.cancelled ? size_t{0} : s.tokens.size() - s.n_issued;
  };
  // Decoding: one token a step (every prompt token is in the cache or on its way, or one is
  // left).
  const auto decoding =
      static_cast<size_t>(std::count_if(running_.begin(), running_.end(), [&](const auto& s) {
        return !s->finished && !s->cancelled && (s->n_issued >= s->n_prompt || pending(*s) == 1);
      }));
  const size_t groups = static_cast<size_t>(options_.groups);
  size_t decodes = (decoding + groups - 1) / groups;
  for (auto& s : running_) {
    if (decodes == 0 || budget <= 0) break;
    if (pending(*s) == 1) {
      take(s.get(), 1);
      --decodes;
    }
  }
  for (auto& s : running_) {
    if (pending(*s) <= 1 || budget <= 0) continue;
    size_t n = std::min(
        {pending(*s), static_cast<size_t>(options_.prefill_chunk), static_cast<size_t>(budget)});
    take(s.get(), n);
  }
  if (step.command.seqs.empty()) {  // idle, or everything in flight: the clears wait for a step
    pending_clear_ = std::move(step.command.clear_slots);
    step.command.clear_slots.clear();
    --next_step_id_;
  }
  return step;
}

void Scheduler::commit(const PlannedStep& step) {
  for (size_t i = 0; i < step.participants.size(); ++i) {
    step.participants[i]->n_cached += step.command.seqs[i].tokens.size();
  }
}

std::vector<std::unique_ptr<Sequence>> Scheduler::drainAll() {
  std::vector<std::unique_ptr<Sequence>> all;
  for (auto& s : running_) all.push_back(std::move(s));
  for (auto& s : waiting_) all.push_back(std::move(s));
  running_.clear();
  waiting_.clear();
  std::fill(slot_used_.begin(), slot_used_.end(), false);
  pending_clear_.clear();
  return all;
}

}  // namespace tpnode::node
