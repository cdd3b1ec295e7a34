// StepCommand: what the driver (node 0) tells every worker before each forward step, sent on
// the mesh control tag. Workers run exactly the same step on their shards.
//
// Wire format (little endian, see docs/wire-protocol.md "Control messages"):
//   u32 magic 'TPSC' | u16 version | u16 kind | u64 step_id | u32 n_seqs | u32 n_clear
//   n_clear x u32 slot                         (KV slots to clear before the step)
//   n_seqs  x { u32 slot | u32 start_pos | u32 flags | u32 n_tokens | u32 n_blocks | u32 n_tap
//               | n_tokens x i32 token | n_blocks x u32 block }
//   (blocks: the sequence's KV block table, covering positions [0, start_pos + n_tokens); none:
//   the slot's own blocks, model/kv_cache.h; with flag kBlocksAppend only the blocks appended
//   to the slot's table since the last command that named the slot (BlockTableMirror);
//   n_tap: its first n_tap tokens are tapped)
//   kind kStep only: u32 n_taps | n_taps x { u32 layer | u32 point }  (the step's activation
//   taps, model/taps.h: every node learns them, a pipeline's stage takes those of its layers)
//   kind kReadTensor only: n_seqs = n_clear = 0, then u32 tensor (index in the shard plan)
//   kind kRetire: n_seqs = n_clear = 0; step_id is the pipeline step to finish
//   kind kKvTier: n_seqs = n_clear = 0, then u32 n_store | n_store x { u64 hash | u32 block }
//                 | u32 n_load | n_load x { u64 hash | u32 block }
// decode() treats the bytes as hostile: every count is checked against the remaining bytes
// and the limits before anything is allocated.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/taps.h"

namespace tpnode::node {

enum class StepKind : uint16_t {
  kStep = 1,        // run the forward on `seqs` (after clearing `clear_slots`)
  kShutdown = 2,    // exit cleanly
  kReset = 3,       // clear every KV slot (after a fault, when the cluster re-forms)
  kReadTensor = 4,  // all-gather the slices of one tensor (RankSet::gatherTensor), no forward
  kRetire = 5,      // pipeline stage 0: finish the oldest step in flight (StagePipeline::finish)
  kKvTier = 6,      // the Redis KV tier: store, then load, the named blocks (node/kv_tier_rank.h)
};

// One block of the Redis KV tier: its chained hash (node/kv_blocks.h) and its id in every
// rank's cache.
struct KvTierBlock {
  uint64_t hash = 0;
  uint32_t block = 0;
  bool operator==(const KvTierBlock&) const = default;
};

// SeqChunk flags: which of its tokens produce a logits row (every rank must agree, since the
// vocab-parallel head all-gathers the rows).
inline constexpr uint32_t kLogitsLast = 1;  // a row for the last token (to sample from)
inline constexpr uint32_t kLogitsAll = 2;   // a row for every token (--dump-logits)
// On the wire only: `blocks` are those appended to the slot's table (BlockTableMirror).
inline constexpr uint32_t kBlocksAppend = 4;

struct SeqChunk {
  uint32_t slot = 0;       // KV cache slot of the sequence
  uint32_t start_pos = 0;  // position of tokens[0]
  uint32_t flags = 0;      // kLogits*
  std::vector<int32_t> tokens;
  std::vector<uint32_t> blocks;  // KV block table (node/kv_blocks.h); empty: the slot's blocks
  uint32_t n_tap = 0;            // its first n_tap tokens are tapped (<= tokens.size())
};

struct StepCommand {
  StepKind kind = StepKind::kStep;
  uint64_t step_id = 0;
  std::vector<uint32_t> clear_slots;
  std::vector<SeqChunk> seqs;
  uint32_t tensor = 0;  // kReadTensor: index of the tensor in the shard plan
  // kKvTier: blocks each rank copies out and writes to Redis (before the loads), and blocks
  // each rank reads from Redis into its cache.
  std::vector<KvTierBlock> stores, loads;
  // kStep: the activation taps of the step's tapped tokens (no logits taps: node 0 takes
  // those from the logits), distinct, in node 0's order.
  std::vector<model::TapSpec> taps;
};

struct StepLimits {
  uint32_t max_seqs = 4096;
  uint32_t max_tokens = 1u << 20;  // over all sequences
  uint32_t max_slot = 1u << 16;
  int32_t n_vocab = INT32_MAX;
  uint32_t n_tensors = UINT32_MAX;  // kReadTensor: tensor < n_tensors
  uint32_t kv_block_size = 16;      // positions per KV block
  uint32_t kv_blocks = UINT32_MAX;  // block ids < kv_blocks
  uint32_t max_ctx = 1u << 20;      // start_pos + n_tokens <= max_ctx
  int32_t n_layer = INT32_MAX;      // tap layers < n_layer
  uint32_t max_taps = 1024;         // taps per step
};

inline constexpr uint32_t kStepMagic = 0x43535054;  // "TPSC"
inline constexpr uint16_t kStepVersion = 4;

void encodeStepCommand(const StepCommand& command, std::vector<std::byte>& out);
// Throws Error(kInvalidData) naming the field and value on malformed or out-of-limit input. A
// chunk with kBlocksAppend keeps that flag and its appended blocks (BlockTableMirror::fromWire
// makes the whole table).
StepCommand decodeStepCommand(std::span<const std::byte> bytes, const StepLimits& limits);

// BlockTableMirror: the block table each slot had in the last step command that named it, kept
// alike by node 0 and every worker, so that a chunk carries only the blocks appended since
// (kBlocksAppend): a decode step usually none. A chunk whose slot is new, was cleared, or holds
// a table that the new one does not extend (another sequence, a re-admitted one) carries its
// whole table.
//
// Contract: one per session on each side (node 0: the commands it sends to the workers; a
// worker: those it receives), fed every kStep command in the order sent, which the mesh keeps
// (other kinds carry no chunks and are ignored). clear_slots drop their slots' tables first.
// Not thread-safe (one thread per side).
class BlockTableMirror {
 public:
  // Node 0, before encoding: replaces each chunk's table by its appended blocks where it can.
  void toWire(StepCommand& command);
  // A worker, after decoding: makes every chunk's whole table again. Received bytes are
  // hostile: Error(kInvalidData) for an append to a slot with no table, a table longer than one
  // context (`limits`) or one that does not cover the positions the chunk writes.
  void fromWire(StepCommand& command, const StepLimits& limits);

 private:
  void clearSlots(const StepCommand& command);  // the command's cleared slots hold no table
  std::vector<uint32_t>& held(uint32_t slot);   // slot's table (grows tables_ to it)
  std::vector<std::vector<uint32_t>> tables_;   // by slot; empty: none
};

}  // namespace tpnode::node
