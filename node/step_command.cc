#include "node/step_command.h"

#include <algorithm>

#include "common/byte_order.h"
#include "common/error.h"

namespace tpnode::node {
namespace {

class Writer {
 public:
  explicit Writer(std::vector<std::byte>& out) : out_(out) { out_.clear(); }
  void u16(uint16_t v) {
    put(2, [&](uint8_t* p) { storeLE16(p, v); });
  }
  void u32(uint32_t v) {
    put(4, [&](uint8_t* p) { storeLE32(p, v); });
  }
  void u64(uint64_t v) {
    put(8, [&](uint8_t* p) { storeLE64(p, v); });
  }

 private:
  template <typename F>
  void put(size_t n, F&& store) {
    size_t at = out_.size();
    out_.resize(at + n);
    store(reinterpret_cast<uint8_t*>(out_.data() + at));
  }
  std::vector<std::byte>& out_;
};

class Reader {
 public:
  explicit Reader(std::span<const std::byte> in) : in_(in) {}
  uint16_t u16(const char* field) { return loadLE16(take(2, field)); }
  uint32_t u32(const char* field) { return loadLE32(take(4, field)); }
  uint64_t u64(const char* field) { return loadLE64(take(8, field)); }
  size_t remaining() const { return in_.size() - at_; }

 private:
  const uint8_t* take(size_t n, const char* field) {
    if (remaining() < n) {
      fail(ErrorCode::kInvalidData, "step command truncated at {} (offset {}, {} bytes left)",
           field, at_, remaining());
    }
    const auto* p = reinterpret_cast<const uint8_t*>(in_.data() + at_);
    at_ += n;
    return p;
  }
  std::span<const std::byte> in_;
  size_t at_ = 0;
};

void checkCount(const char* field, uint64_t value, uint64_t limit, size_t bytes_each,
                size_t remaining) {
  if (value > limit) {
    fail(ErrorCode::kInvalidData, "step command {} = {} exceeds the limit {}", field, value, limit);
  }
  if (value * bytes_each > remaining) {
    fail(ErrorCode::kInvalidData, "step command {} = {} needs {} bytes but only {} remain", field,
         value, value * bytes_each, remaining);
  }
}

// Blocks of one context at most; a table (not an append) must cover the positions written.
uint64_t maxTableBlocks(const StepLimits& limits) {
  const uint64_t bs = std::max<uint32_t>(1, limits.kv_block_size);
  return (uint64_t{limits.max_ctx} + bs - 1) / bs;
}

void checkCovers(const SeqChunk& s, uint64_t n_blocks, const StepLimits& limits) {
  const uint64_t end = uint64_t{s.start_pos} + s.tokens.size();
  const uint64_t bs = std::max<uint32_t>(1, limits.kv_block_size);
  const uint64_t need = (end + bs - 1) / bs;
  if (n_blocks != 0 && n_blocks < need) {
    fail(ErrorCode::kInvalidData, "step command block table of {} blocks, positions to {} need {}",
         n_blocks, end, need);
  }
}

// A chunk's block table: none (the slot's blocks), or enough to cover every position the chunk
// writes, each id inside the cache; with kBlocksAppend, blocks to append (checked whole by
// BlockTableMirror::fromWire).
void readBlocks(Reader& r, SeqChunk& s, uint32_t n_blocks, const StepLimits& limits) {
  const uint64_t end = uint64_t{s.start_pos} + s.tokens.size();
  if (end > limits.max_ctx) {
    fail(ErrorCode::kInvalidData, "step command chunk ends at position {}, beyond the context {}",
         end, limits.max_ctx);
  }
  checkCount("n_blocks", n_blocks, maxTableBlocks(limits), 4, r.remaining());
  if ((s.flags & kBlocksAppend) == 0) checkCovers(s, n_blocks, limits);
  s.blocks.resize(n_blocks);
  for (uint32_t& b : s.blocks) {
    b = r.u32("block");
    if (b >= limits.kv_blocks) {
      fail(ErrorCode::kInvalidData, "step command KV block {} is outside the {} blocks", b,
           limits.kv_blocks);
    }
  }
}

// kKvTier: the blocks to store and to load, each id inside the cache; at most kv_blocks each.
void readTierBlocks(Reader& r, StepCommand& c, uint32_t n_seqs, uint32_t n_clear,
                    const StepLimits& limits) {
  if (n_seqs != 0 || n_clear != 0) {
    fail(ErrorCode::kInvalidData, "KV tier command carries {} seqs and {} clears, expected 0",
         n_seqs, n_clear);
  }
  for (auto* list : {&c.stores, &c.loads}) {
    const uint32_t n = r.u32("n_tier_blocks");
    checkCount("n_tier_blocks", n, limits.kv_blocks, 12, r.remaining());
    list->resize(n);
    for (KvTierBlock& b : *list) {
      b.hash = r.u64("tier hash");
      b.block = r.u32("tier block");
      if (b.block >= limits.kv_blocks) {
        fail(ErrorCode::kInvalidData, "KV tier command block {} is outside the {} blocks", b.block,
             limits.kv_blocks);
      }
    }
  }
}

// The step's taps: distinct layer/point pairs of the model's layers (no logits taps).
void readTaps(Reader& r, StepCommand& c, const StepLimits& limits) {
  const uint32_t n_taps = r.u32("n_taps");
  checkCount("n_taps", n_taps, limits.max_taps, 8, r.remaining());
  c.taps.resize(n_taps);
  for (model::TapSpec& t : c.taps) {
    const uint32_t layer = r.u32("tap layer");
    const uint32_t point = r.u32("tap point");
    if (layer >= static_cast<uint32_t>(limits.n_layer)) {
      fail(ErrorCode::kInvalidData, "step command tap layer {} is outside the model's {} layers",
           layer, limits.n_layer);
    }
    if (point > static_cast<uint32_t>(model::TapPoint::kMlpOut)) {
      fail(ErrorCode::kInvalidData, "step command tap point {} is not a layer's", point);
    }
    t = {static_cast<int>(layer), static_cast<model::TapPoint>(point)};
    if (std::find(c.taps.data(), &t, t) != &t) {
      fail(ErrorCode::kInvalidData, "step command names tap {}/{} twice", layer,
           model::tapPointName(t.point));
    }
  }
}

}  // namespace

void encodeStepCommand(const StepCommand& c, std::vector<std::byte>& out) {
  Writer w(out);
  w.u32(kStepMagic);
  w.u16(kStepVersion);
  w.u16(static_cast<uint16_t>(c.kind));
  w.u64(c.step_id);
  w.u32(static_cast<uint32_t>(c.seqs.size()));
  w.u32(static_cast<uint32_t>(c.clear_slots.size()));
  for (uint32_t slot : c.clear_slots) w.u32(slot);
  for (const SeqChunk& s : c.seqs) {
    w.u32(s.slot);
    w.u32(s.start_pos);
    w.u32(s.flags);
    w.u32(static_cast<uint32_t>(s.tokens.size()));
    w.u32(static_cast<uint32_t>(s.blocks.size()));
    w.u32(s.n_tap);
    for (int32_t t : s.tokens) w.u32(static_cast<uint32_t>(t));
    for (uint32_t b : s.blocks) w.u32(b);
  }
  if (c.kind == StepKind::kReadTensor) w.u32(c.tensor);
  if (c.kind == StepKind::kKvTier) {
    for (const auto* list : {&c.stores, &c.loads}) {
      w.u32(static_cast<uint32_t>(list->size()));
      for (const KvTierBlock& b : *list) {
        w.u64(b.hash);
        w.u32(b.block);
      }
    }
  }
  if (c.kind == StepKind::kStep) {
    w.u32(static_cast<uint32_t>(c.taps.size()));
    for (const model::TapSpec& t : c.taps) {
      w.u32(static_cast<uint32_t>(t.layer));
      w.u32(static_cast<uint32_t>(t.point));
    }
  }
}

StepCommand decodeStepCommand(std::span<const std::byte> bytes, const StepLimits& limits) {
  Reader r(bytes);
  uint32_t magic = r.u32("magic");
  if (magic != kStepMagic) {
    fail(ErrorCode::kInvalidData, "step command magic 0x{:08x}, expected 0x{:08x}", magic,
         kStepMagic);
  }
  uint16_t version = r.u16("version");
  if (version != kStepVersion) {
    fail(ErrorCode::kMismatch, "step command version {}, this build speaks {}", version,
         kStepVersion);
  }
  StepCommand c;
  uint16_t kind = r.u16("kind");
  if (kind < 1 || kind > 6) fail(ErrorCode::kInvalidData, "step command kind {} is unknown", kind);
  c.kind = static_cast<StepKind>(kind);
  c.step_id = r.u64("step_id");
  uint32_t n_seqs = r.u32("n_seqs");
  uint32_t n_clear = r.u32("n_clear");
  checkCount("n_seqs", n_seqs, limits.max_seqs, 24, r.remaining());
  checkCount("n_clear", n_clear, limits.max_seqs, 4, r.remaining());
  c.clear_slots.reserve(n_clear);
  for (uint32_t i = 0; i < n_clear; ++i) {
    uint32_t slot = r.u32("clear_slots");
    if (slot > limits.max_slot) {
      fail(ErrorCode::kInvalidData, "step command clear slot {} exceeds {}", slot, limits.max_slot);
    }
    c.clear_slots.push_back(slot);
  }
  uint64_t total_tokens = 0;
  c.seqs.resize(n_seqs);
  for (SeqChunk& s : c.seqs) {
    s.slot = r.u32("slot");
    s.start_pos = r.u32("start_pos");
    s.flags = r.u32("flags");
    if ((s.flags & ~(kLogitsLast | kLogitsAll | kBlocksAppend)) != 0) {
      fail(ErrorCode::kInvalidData, "step command seq flags 0x{:x} has unknown bits", s.flags);
    }
    uint32_t n_tokens = r.u32("n_tokens");
    uint32_t n_blocks = r.u32("n_blocks");
    s.n_tap = r.u32("n_tap");
    if (s.n_tap > n_tokens) {
      fail(ErrorCode::kInvalidData, "step command n_tap {} exceeds the chunk's {} tokens", s.n_tap,
           n_tokens);
    }
    if (s.slot > limits.max_slot) {
      fail(ErrorCode::kInvalidData, "step command slot {} exceeds {}", s.slot, limits.max_slot);
    }
    total_tokens += n_tokens;
    checkCount("n_tokens", total_tokens, limits.max_tokens, 0, r.remaining());
    checkCount("n_tokens", n_tokens, limits.max_tokens, 4, r.remaining());
    s.tokens.resize(n_tokens);
    for (int32_t& t : s.tokens) {
      t = static_cast<int32_t>(r.u32("token"));
      if (t < 0 || t >= limits.n_vocab) {
        fail(ErrorCode::kInvalidData, "step command token id {} is outside the vocabulary 0..{}", t,
             limits.n_vocab - 1);
      }
    }
    readBlocks(r, s, n_blocks, limits);
  }
  if (c.kind == StepKind::kReadTensor) {
    if (n_seqs != 0 || n_clear != 0) {
      fail(ErrorCode::kInvalidData, "read-tensor command carries {} seqs and {} clears, expected 0",
           n_seqs, n_clear);
    }
    c.tensor = r.u32("tensor");
    if (c.tensor >= limits.n_tensors) {
      fail(ErrorCode::kInvalidData, "read-tensor command tensor {} is outside the {} tensors",
           c.tensor, limits.n_tensors);
    }
  }
  if (c.kind == StepKind::kStep) readTaps(r, c, limits);
  if (c.kind == StepKind::kRetire && (n_seqs != 0 || n_clear != 0)) {
    fail(ErrorCode::kInvalidData, "retire command carries {} seqs and {} clears, expected 0",
         n_seqs, n_clear);
  }
  if (c.kind == StepKind::kKvTier) readTierBlocks(r, c, n_seqs, n_clear, limits);
  if (r.remaining() != 0) {
    fail(ErrorCode::kInvalidData, "step command has {} trailing bytes", r.remaining());
  }
  return c;
}

void BlockTableMirror::clearSlots(const StepCommand& c) {
  for (uint32_t slot : c.clear_slots) {
    if (slot < tables_.size()) tables_[slot].clear();
  }
}

std::vector<uint32_t>& BlockTableMirror::held(uint32_t slot) {
  if (slot >= tables_.size()) tables_.resize(size_t{slot} + 1);
  return tables_[slot];
}

void BlockTableMirror::toWire(StepCommand& c) {
  if (c.kind != StepKind::kStep) return;
  clearSlots(c);
  for (SeqChunk& s : c.seqs) {
    std::vector<uint32_t>& table = held(s.slot);
    const bool extends = !table.empty() && table.size() <= s.blocks.size() &&
                         std::equal(table.begin(), table.end(), s.blocks.begin());
    if (!extends) {
      table = s.blocks;
      continue;
    }
    const auto had = static_cast<std::ptrdiff_t>(table.size());
    table.insert(table.end(), s.blocks.begin() + had, s.blocks.end());
    s.blocks.erase(s.blocks.begin(), s.blocks.begin() + had);
    s.flags |= kBlocksAppend;
  }
}

void BlockTableMirror::fromWire(StepCommand& c, const StepLimits& limits) {
  if (c.kind != StepKind::kStep) return;
  clearSlots(c);
  for (SeqChunk& s : c.seqs) {
    // Slots are at most limits.max_slot (decodeStepCommand checked).
    std::vector<uint32_t>& table = held(s.slot);
    if ((s.flags & kBlocksAppend) != 0) {
      if (table.empty()) {
        fail(ErrorCode::kInvalidData,
             "step command appends {} blocks to slot {}, which holds no block table",
             s.blocks.size(), s.slot);
      }
      if (table.size() + s.blocks.size() > maxTableBlocks(limits)) {
        fail(ErrorCode::kInvalidData,
             "step command appends {} blocks to slot {}'s {}: more than one context ({})",
             s.blocks.size(), s.slot, table.size(), maxTableBlocks(limits));
      }
      s.blocks.insert(s.blocks.begin(), table.begin(), table.end());
      s.flags &= ~kBlocksAppend;
    }
    checkCovers(s, s.blocks.size(), limits);
    table = s.blocks;
  }
}

}  // namespace tpnode::node
