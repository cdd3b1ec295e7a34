// Scheduler: continuous batching for the driver (node 0). Pure bookkeeping, no threads and no
// model: it decides, at each step boundary, which sequences take part in the next forward step
// and with which tokens.
//
// Policy
// - `slots` sequence slots and `kv_blocks` KV blocks (node/kv_blocks.h) shared by all
//   sequences. A waiting sequence is admitted (FIFO) when a slot is free and the blocks of its
//   whole prompt are (after reusing the longest cached prefix of whole blocks, which it then
//   does not prefill; at least its last token is always computed). Sequences asking for every
//   logits row (dump-logits, taps) reuse nothing.
// - A decode that needs a new block when none is free preempts the most recently admitted
//   sequence (its blocks are released, it goes back to the front of the queue and recomputes
//   its tokens, mostly from the prefix cache, when readmitted); a prefill chunk shrinks to the
//   blocks it can get.
// - Every running sequence that has all its tokens in the cache but the last one decodes one
//   token per step. Prompts are prefilled in chunks of at most `prefill_chunk` tokens, and a
//   step holds at most `max_step_tokens` tokens, decodes first, so that a long prompt never
//   stalls the decode of the others.
// - A finished or cancelled sequence leaves at the first step boundary at which none of its
//   steps is in flight; its blocks are released (full ones stay cached for reuse until
//   evicted, LRU) and its slot is cleared on every node by the next StepCommand (clear_slots)
//   and reused.
// - Every chunk carries its sequence's whole block table; a block enters the prefix index
//   after the step that wrote its last position is committed (commit()).
// - Steps in flight (a pipeline split: node/driver.h keeps up to `groups` steps in flight):
//   plan() may be called again before the steps it planned are committed. A sequence's tokens
//   are planned once (n_issued); a sequence waiting for its sampled token (every token issued)
//   sits out until the token arrives, so each in-flight step holds other sequences: the running
//   sequences fall into up to `groups` disjoint groups by themselves. A step takes at most
//   ceil(decoding / groups) decodes, so that the decoding sequences spread over `groups` steps;
//   a long prompt's next chunk may go out while its previous chunk is still in flight (every
//   stage runs steps in the order they were issued, so the chunk finds the earlier ones'
//   cache). KV blocks written by different sequences are disjoint (shared prefix blocks are
//   only read), so the steps' interleaving across stages does not change any sequence's
//   tokens. With groups = 1 and every step committed before the next plan(), this is plain
//   continuous batching.
// - Blocks with steps in flight: a sequence's blocks cover its issued positions (n_issued:
//   written or on their way), taken when the chunk is planned; the prefix index follows the
//   committed ones (n_cached). A sequence with a step in flight is never preempted and never
//   releases a block: a decode short of a block preempts the newest later sequence with no
//   step in flight, else waits while a later one is in flight, else preempts itself (when it
//   has no step in flight). So a block with no reference is read or written by no step in
//   flight, and a reused or evicted block is taken only by steps planned after every step
//   that wrote it was committed.
//
// - A second tier (setKvTier: the KV blocks shared in Redis, node/kv_tier_rank.h): every block
//   that enters the prefix index is queued to be stored (PlannedStep::stores; each rank copies
//   it out before the step that may reuse it). On admission, after the local prefix, the
//   lookup says how many further blocks of the prompt's chain the tier holds (at most
//   kMaxTierLoadBlocks, leaving the last token to compute); those blocks are allocated and
//   named in PlannedStep::loads, and the sequence sits out that step. finishLoads() then takes
//   the cluster's agreed result: the blocks loaded on every rank, up to the first that was not,
//   count as cached (and enter the index); the rest are prefilled like any uncached block.
//
// Threads: one thread (the driver's loop) owns a Scheduler.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "node/kv_blocks.h"
#include "node/step_command.h"

namespace tpnode::node {

// The blocks a second tier holds (node 0's view of the Redis KV tier).
class KvTierLookup {
 public:
  virtual ~KvTierLookup() = default;
  // How many of `hashes` (a chain of blocks, in order) the tier holds, counted from the first;
  // 0 when it cannot tell (down, slow). Bounded in time.
  virtual size_t present(std::span<const uint64_t> hashes) = 0;
};

// Blocks one admission asks the tier for at most.
inline constexpr size_t kMaxTierLoadBlocks = 256;

struct SchedulerOptions {
  int slots = 4;
  int ctx_size = 2048;  // per slot
  int max_step_tokens = 512;
  int prefill_chunk = 256;
  int groups = 1;  // steps node 0 keeps in flight (pipeline stages); decodes spread over them
  int kv_block_size = 16;
  int kv_blocks = 0;  // 0: slots x ctx_size positions; at least one context
  bool prefix_cache = true;
  uint64_t fingerprint = 0;  // seeds the block hashes (node/kv_blocks.h)
};

// Prefix reuse so far (for /metrics).
struct PrefixStats {
  uint64_t lookups = 0;        // admissions that looked for a cached prefix
  uint64_t hits = 0;           // ... and reused at least one block
  uint64_t cached_tokens = 0;  // prompt tokens not prefilled thanks to reuse
  uint64_t preemptions = 0;
  uint64_t tier_loaded = 0;  // blocks loaded from the second tier on every rank
  uint64_t tier_failed = 0;  // blocks the tier was asked for and the cluster recomputed
};

struct Sequence {
  uint64_t id = 0;
  std::vector<int32_t> tokens;  // prompt then generated tokens
  size_t n_prompt = 0;
  size_t n_cached = 0;  // tokens already in the KV cache (committed steps, or a reused prefix)
  size_t n_issued = 0;  // tokens planned into steps (>= n_cached; more while steps are in flight)
  int max_new_tokens = 0;
  int slot = -1;
  // KV block table (positions [0, blocks.size() x block size)); covers at least n_issued.
  std::vector<uint32_t> blocks;
  std::vector<uint64_t> hashes;  // chained hashes of the full blocks published so far
  size_t cached_prompt = 0;      // prompt tokens reused from the prefix cache when first admitted
  std::vector<KvTierBlock> loading;  // blocks after the local prefix awaiting a tier load
  bool counts_load = false;          // the load counts in cached_prompt (first admission)
  bool admitted_once = false;
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
  // The second tier (setKvTier), run before the command: blocks to store, then blocks to load
  // (loading[i]'s blocks, in order, one after another).
  std::vector<KvTierBlock> stores, loads;
  std::vector<Sequence*> loading;
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

  // After the step ran: moves n_cached forward for every participant and enters the blocks it
  // completed into the prefix index. Steps in flight are committed in the order they were
  // planned.
  void commit(const PlannedStep& step);

  size_t waiting() const { return waiting_.size(); }
  size_t running() const { return running_.size(); }
  int freeSlots() const;
  const SchedulerOptions& options() const { return options_; }
  KvBlockStats blockStats() const { return pool_.stats(); }
  const PrefixStats& prefixStats() const { return prefix_stats_; }
  // The pool's second-tier observer (node/kv_blocks.h).
  KvBlockPool& blockPool() { return pool_; }

  // Enables the second tier (see the policy); `lookup` outlives the scheduler. Takes the pool's
  // observer.
  void setKvTier(KvTierLookup* lookup);
  // After the step's tier command ran: loaded[i] tells whether step.loads[i] is in every
  // rank's cache. Call before the next plan().
  void finishLoads(const PlannedStep& step, const std::vector<bool>& loaded);

  // Every sequence (waiting or running) is removed and returned; all slots are cleared and
  // every block forgotten (the ranks' caches are gone).
  std::vector<std::unique_ptr<Sequence>> drainAll();

 private:
  bool admit(Sequence& s);
  bool grow(Sequence& s, size_t positions);  // blocks for `positions`, false if none left
  void releaseBlocks(Sequence& s);
  void preempt(size_t running_index);
  void probeTier(Sequence& s);
  void publishCached(Sequence& s);  // enters the blocks below n_cached into the index

  // Queues published blocks to be stored (setKvTier).
  class StoreQueue : public KvBlockObserver {
   public:
    void onCached(uint32_t block, uint64_t hash) override {
      if (enabled) pending.push_back({hash, block});
    }
    void onEvict(uint32_t, uint64_t) override {}
    bool enabled = true;  // off while blocks loaded from the tier are published
    std::vector<KvTierBlock> pending;
  };
  KvTierLookup* tier_ = nullptr;
  StoreQueue stores_;

  SchedulerOptions options_;
  KvBlockPool pool_;
  PrefixStats prefix_stats_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;
  std::vector<bool> slot_used_;
  std::vector<uint32_t> pending_clear_;
  uint64_t next_step_id_ = 1;
};

}  // namespace tpnode::node
