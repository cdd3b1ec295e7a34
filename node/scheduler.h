// Scheduler: continuous batching for the driver (node 0). Pure bookkeeping, no threads and no
// model: it decides, at each step boundary, which sequences take part in the next forward step
// and with which tokens.
//
// Policy
// - `slots` KV slots; a waiting sequence is admitted (FIFO) when a slot is free.
// - Every running sequence that has all its tokens in the cache but the last one decodes one
//   token per step. Prompts are prefilled in chunks of at most `prefill_chunk` tokens, and a
//   step holds at most `max_step_tokens` tokens, decodes first, so that a long prompt never
//   stalls the decode of the others.
// - A finished or cancelled sequence leaves at the first step boundary at which none of its
//   steps is in flight; its slot is cleared on every node by the next StepCommand (clear_slots)
//   and reused.
// - Steps in flight (a pipeline split: node/driver.h keeps up to `groups` steps in flight):
//   plan() may be called again before the steps it planned are committed. A sequence's tokens
//   are planned once (n_issued); a sequence waiting for its sampled token (every token issued)
//   sits out until the token arrives, so each in-flight step holds other sequences: the running
//   sequences fall into up to `groups` disjoint groups by themselves. A step takes at most
//   ceil(decoding / groups) decodes, so that the decoding sequences spread over `groups` steps;
//   a long prompt's next chunk may go out while its previous chunk is still in flight (every
//   stage runs steps in the order they were issued, so the chunk finds the earlier ones'
//   cache). KV slots of different sequences are disjoint, so the steps' interleaving across
//   stages does not change any sequence's tokens. With groups = 1 and every step committed
//   before the next plan(), this is plain continuous batching.
//
// Threads: one thread (the driver's loop) owns a Scheduler.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "node/step_command.h"

namespace tpnode::node {

struct SchedulerOptions {
  int slots = 4;
  int ctx_size = 2048;  // per slot
  int max_step_tokens = 512;
  int prefill_chunk = 256;
  int groups = 1;  // steps node 0 keeps in flight (pipeline stages); decodes spread over them
};

struct Sequence {
  uint64_t id = 0;
  std::vector<int32_t> tokens;  // prompt then generated tokens
  size_t n_prompt = 0;
  size_t n_cached = 0;  // tokens already in the KV cache (committed steps)
  size_t n_issued = 0;  // tokens planned into steps (>= n_cached; more while steps are in flight)
  int max_new_tokens = 0;
  int slot = -1;
  bool all_logits = false;  // a logits row for every position (--dump-logits)
  bool cancelled = false;
  bool finished = false;
  size_t generated() const { return tokens.size() - n_prompt; }
  bool inFlight() const { return n_issued > n_cached; }
};

struct PlannedStep {
  StepCommand command;
  // Sequences whose last token is in this step: they get a logits row (in command.seqs order
  // restricted to these) and then a sampled token.
  std::vector<Sequence*> sampled;
  // seqs[i] of the command belongs to participants[i].
  std::vector<Sequence*> participants;
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerOptions options);

  // Queues a sequence. Its prompt must be non-empty and fit the context with room for at
  // least one generated token (the caller checks and reports; here it is an invariant).
  Sequence* add(uint64_t id, std::vector<int32_t> prompt, int max_new_tokens);

  // Marks a sequence cancelled; it leaves at the next plan().
  void cancel(uint64_t id);

  // Removes finished/cancelled sequences (returning them, so the caller can report them),
  // admits waiting ones, and plans the next step. An empty command.seqs means idle.
  PlannedStep plan(std::vector<std::unique_ptr<Sequence>>& removed);

  // After the step ran: moves n_cached forward for every participant. Steps in flight are
  // committed in the order they were planned.
  void commit(const PlannedStep& step);

  size_t waiting() const { return waiting_.size(); }
  size_t running() const { return running_.size(); }
  int freeSlots() const;
  const SchedulerOptions& options() const { return options_; }

  // Every sequence (waiting or running) is removed and returned; all slots are cleared.
  std::vector<std::unique_ptr<Sequence>> drainAll();

 private:
  SchedulerOptions options_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;
  std::vector<bool> slot_used_;
  std::vector<uint32_t> pending_clear_;
  uint64_t next_step_id_ = 1;
};

}  // namespace tpnode::node
