#include "node/scheduler.h"

#include <algorithm>

#include "common/check.h"
#include "model/kv_cache.h"

namespace tpnode::node {

namespace {

// Blocks for `positions` positions: model::kvBlocksFor, in the scheduler's unsigned sizes.
size_t blocksFor(size_t positions, size_t block_size) {
  return static_cast<size_t>(
      model::kvBlocksFor(static_cast<int64_t>(positions), static_cast<int64_t>(block_size)));
}

uint32_t poolBlocks(const SchedulerOptions& o) {
  if (o.kv_blocks > 0) return static_cast<uint32_t>(o.kv_blocks);
  return static_cast<uint32_t>(static_cast<size_t>(o.slots) *
                               blocksFor(static_cast<size_t>(o.ctx_size),
                                         static_cast<size_t>(std::max(1, o.kv_block_size))));
}

}  // namespace

Scheduler::Scheduler(SchedulerOptions options)
    : options_(options),
      pool_(poolBlocks(options), static_cast<uint32_t>(std::max(1, options.kv_block_size)),
            options.prefix_cache, options.fingerprint),
      slot_used_(static_cast<size_t>(options.slots), false) {
  TP_CHECK(options_.slots > 0 && options_.max_step_tokens > 0 && options_.prefill_chunk > 0 &&
           options_.groups > 0);
  TP_CHECK(pool_.total() >= blocksFor(static_cast<size_t>(options_.ctx_size), pool_.blockSize()),
           "{} KV blocks of {} cannot hold one context of {}", pool_.total(), pool_.blockSize(),
           options_.ctx_size);
}

bool Scheduler::grow(Sequence& s, size_t positions) {
  const size_t need = blocksFor(positions, pool_.blockSize());
  while (s.blocks.size() < need) {
    std::optional<uint32_t> b = pool_.allocate();
    if (!b) return false;
    s.blocks.push_back(*b);
  }
  return true;
}

void Scheduler::releaseBlocks(Sequence& s) {
  // Tail first: the LRU then evicts a prefix's last blocks before its first ones.
  for (auto it = s.blocks.rbegin(); it != s.blocks.rend(); ++it) pool_.release(*it);
  s.blocks.clear();
  s.hashes.clear();
}

bool Scheduler::admit(Sequence& s) {
  TP_CHECK(s.blocks.empty() && s.n_cached == 0 && s.n_issued == 0);
  const size_t bs = pool_.blockSize();
  const bool reuse = pool_.prefixCache() && !s.all_logits;
  if (reuse) pool_.matchPrefix(s.tokens, (s.tokens.size() - 1) / bs, s.blocks, s.hashes);
  const size_t need = blocksFor(s.tokens.size(), bs) - s.blocks.size();
  if (pool_.freeBlocks() < need) {
    releaseBlocks(s);
    return false;
  }
  s.n_cached = s.n_issued = s.blocks.size() * bs;  // the reused prefix is in every cache
  const bool got = grow(s, s.tokens.size());
  TP_CHECK(got, "{} free KV blocks did not give {}", pool_.freeBlocks(), need);
  if (reuse && tier_ != nullptr) probeTier(s);
  if (!s.admitted_once) {
    s.counts_load = !s.loading.empty();
    s.admitted_once = true;
    s.cached_prompt = std::min(s.n_cached, s.n_prompt);
    if (reuse) {
      ++prefix_stats_.lookups;
      prefix_stats_.hits += s.cached_prompt > 0 ? 1 : 0;
      prefix_stats_.cached_tokens += s.cached_prompt;
    }
  }
  return true;
}

// The blocks after the local prefix that the tier holds become loads (the sequence's blocks are
// already allocated; the load fills them).
void Scheduler::probeTier(Sequence& s) {
  const size_t bs = pool_.blockSize();
  const size_t first = s.n_cached / bs;
  const size_t last = std::min((s.tokens.size() - 1) / bs, first + kMaxTierLoadBlocks);
  if (last <= first) return;
  std::vector<uint64_t> chain;
  uint64_t prev = first == 0 ? pool_.fingerprint() : s.hashes[first - 1];
  for (size_t b = first; b < last; ++b) {
    prev = kvBlockHash(prev, std::span<const int32_t>(s.tokens).subspan(b * bs, bs));
    chain.push_back(prev);
  }
  const size_t n = std::min(tier_->present(chain), chain.size());
  for (size_t i = 0; i < n; ++i) s.loading.push_back({chain[i], s.blocks[first + i]});
}

void Scheduler::setKvTier(KvTierLookup* lookup) {
  tier_ = lookup;
  pool_.setObserver(lookup != nullptr ? &stores_ : nullptr);
}

void Scheduler::finishLoads(const PlannedStep& step, const std::vector<bool>& loaded) {
  TP_CHECK(loaded.size() == step.loads.size());
  const size_t bs = pool_.blockSize();
  size_t at = 0;
  for (Sequence* s : step.loading) {
    const size_t k = s->loading.size();
    size_t ok = 0;
    while (ok < k && loaded[at + ok]) ++ok;  // up to the first block not loaded everywhere
    at += k;
    s->loading.clear();
    prefix_stats_.tier_loaded += ok;
    prefix_stats_.tier_failed += k - ok;
    s->n_cached = s->n_issued = s->n_cached + ok * bs;
    stores_.enabled = false;  // they came from the tier: not stored again
    publishCached(*s);
    stores_.enabled = true;
    if (s->counts_load) {
      s->counts_load = false;
      const size_t add = std::min(ok * bs, s->n_prompt - std::min(s->n_prompt, s->cached_prompt));
      if (s->cached_prompt == 0 && add > 0) ++prefix_stats_.hits;
      s->cached_prompt += add;
      prefix_stats_.cached_tokens += add;
    }
  }
}

void Scheduler::preempt(size_t i) {
  TP_CHECK(!running_[i]->inFlight(), "sequence {} preempted with a step in flight",
           running_[i]->id);
  std::unique_ptr<Sequence> s = std::move(running_[i]);
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
  releaseBlocks(*s);
  s->loading.clear();
  s->counts_load = false;
  s->n_cached = s->n_issued = 0;
  slot_used_[static_cast<size_t>(s->slot)] = false;
  pending_clear_.push_back(static_cast<uint32_t>(s->slot));
  s->slot = -1;
  ++prefix_stats_.preemptions;
  waiting_.push_front(std::move(s));
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
  // 1. Leave: finished and cancelled sequences free their slots and blocks (once no step of
  // theirs is in flight: its result still comes back to them, and it still writes the blocks).
  for (auto it = running_.begin(); it != running_.end();) {
    if (((*it)->finished || (*it)->cancelled) && !(*it)->inFlight()) {
      releaseBlocks(**it);
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
  // 2. Join: admit waiting sequences into free slots, FIFO, while their blocks are free.
  while (!waiting_.empty() && freeSlots() > 0) {
    if (!admit(*waiting_.front())) break;
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
    chunk.blocks = s->blocks;
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
  // A sequence waiting for its tier load sits out the step.
  auto pending = [](const Sequence& s) {
    return s.finished || s.cancelled || !s.loading.empty() ? size_t{0}
                                                           : s.tokens.size() - s.n_issued;
  };
  // Decoding: one token a step (every token but at most one is in the cache or on its way).
  const auto decoding =
      static_cast<size_t>(std::count_if(running_.begin(), running_.end(), [&](const auto& s) {
        return !s->finished && !s->cancelled && s->loading.empty() && pending(*s) <= 1;
      }));
  const size_t groups = static_cast<size_t>(options_.groups);
  size_t decodes = (decoding + groups - 1) / groups;
  // A decode short of a block preempts the newest later sequence that may recompute (not one
  // that wants every logits row) and has no step in flight. When there is none it waits while
  // such a later sequence is in flight (it becomes a victim once its step is committed), else
  // preempts itself if it may (no step in flight, not every logits row); otherwise it waits.
  for (size_t i = 0; i < running_.size(); ++i) {
    if (decodes == 0 || budget <= 0) break;
    Sequence* s = running_[i].get();
    if (pending(*s) != 1) continue;
    bool waits = false, later_in_flight = false;
    while (!grow(*s, s->n_issued + 1)) {
      size_t victim = running_.size();
      for (size_t j = running_.size(); j-- > i + 1;) {
        const Sequence& v = *running_[j];
        if (v.all_logits) continue;
        if (v.inFlight()) {
          later_in_flight = true;
          continue;
        }
        victim = j;
        break;
      }
      if (victim == running_.size()) {
        waits = true;
        break;
      }
      preempt(victim);
    }
    if (!waits) {
      take(s, 1);
      --decodes;
    } else if (!later_in_flight && !s->all_logits && !s->inFlight()) {
      preempt(i--);
    }
  }
  for (auto& s : running_) {
    if (pending(*s) <= 1 || budget <= 0) continue;
    size_t n = std::min(
        {pending(*s), static_cast<size_t>(options_.prefill_chunk), static_cast<size_t>(budget)});
    // Admission took the prompt's blocks; this covers the rest (positions issued or planned).
    grow(*s, s->n_issued + n);
    n = std::min(n, s->blocks.size() * pool_.blockSize() - s->n_issued);
    if (n > 0) take(s.get(), n);
  }
  if (tier_ != nullptr) {
    step.stores = std::move(stores_.pending);
    stores_.pending.clear();
    for (auto& s : running_) {
      if (s->loading.empty()) continue;
      step.loads.insert(step.loads.end(), s->loading.begin(), s->loading.end());
      step.loading.push_back(s.get());
    }
  }
  if (step.command.seqs.empty()) {  // idle, or everything in flight: the clears wait for a step
    // (with any this plan added by preempting)
    step.command.clear_slots.insert(step.command.clear_slots.end(), pending_clear_.begin(),
                                    pending_clear_.end());
    pending_clear_ = std::move(step.command.clear_slots);
    step.command.clear_slots.clear();
    --next_step_id_;
  }
  return step;
}

void Scheduler::commit(const PlannedStep& step) {
  for (size_t i = 0; i < step.participants.size(); ++i) {
    Sequence& s = *step.participants[i];
    s.n_cached += step.command.seqs[i].tokens.size();
    publishCached(s);
  }
}

// Blocks whose every position is now in the cache on every rank join the prefix index.
void Scheduler::publishCached(Sequence& s) {
  const size_t bs = pool_.blockSize();
  while (s.hashes.size() < s.blocks.size() && (s.hashes.size() + 1) * bs <= s.n_cached) {
    const size_t b = s.hashes.size();
    const uint64_t prev = b == 0 ? pool_.fingerprint() : s.hashes[b - 1];
    s.hashes.push_back(
        pool_.publish(s.blocks[b], prev, std::span<const int32_t>(s.tokens).subspan(b * bs, bs)));
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
  stores_.pending.clear();
  for (auto& s : all) {
    s->blocks.clear();
    s->hashes.clear();
    s->loading.clear();
  }
  pool_.reset();
  return all;
}

}  // namespace tpnode::node
