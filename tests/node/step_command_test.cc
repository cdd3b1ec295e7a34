#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "common/byte_order.h"
#include "common/error.h"
#include "node/step_command.h"

namespace tpnode::node {
namespace {

StepCommand sample() {
  StepCommand c;
  c.step_id = 42;
  c.clear_slots = {3};
  c.seqs.push_back({1, 0, kLogitsAll, {5, 6, 7}});
  c.seqs.push_back({2, 17, kLogitsLast, {9}, {4, 0, 7, 2, 1}});  // 5 blocks of 4 cover 0..17
  c.seqs[0].n_tap = 2;
  c.taps = {{1, model::TapPoint::kAttnOut}, {0, model::TapPoint::kResidual}};
  return c;
}

// Encodes `c` and decodes it under `lim`: the error's message, or "" when it is accepted.
std::string message(const StepCommand& c, const StepLimits& lim) {
  std::vector<std::byte> b;
  encodeStepCommand(c, b);
  try {
    decodeStepCommand(b, lim);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(StepCommandTest, RoundTrips) {
  std::vector<std::byte> bytes;
  encodeStepCommand(sample(), bytes);
  StepCommand d = decodeStepCommand(bytes, {});
  EXPECT_EQ(d.kind, StepKind::kStep);
  EXPECT_EQ(d.step_id, 42u);
  EXPECT_EQ(d.clear_slots, std::vector<uint32_t>{3});
  ASSERT_EQ(d.seqs.size(), 2u);
  EXPECT_EQ(d.seqs[0].tokens, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(d.seqs[1].start_pos, 17u);
  EXPECT_EQ(d.seqs[0].flags, kLogitsAll);
  EXPECT_EQ(d.seqs[1].flags, kLogitsLast);
  EXPECT_TRUE(d.seqs[0].blocks.empty());
  EXPECT_EQ(d.seqs[1].blocks, (std::vector<uint32_t>{4, 0, 7, 2, 1}));
  EXPECT_EQ(d.seqs[0].n_tap, 2u);
  EXPECT_EQ(d.seqs[1].n_tap, 0u);
  EXPECT_EQ(d.taps, sample().taps);
}

// The taps every node learns (a pipeline's stages take those of their layers) are checked:
// a layer beyond the model, a logits or unknown point, a repeated tap, more tapped tokens
// than the chunk has.
TEST(StepCommandTest, HostileTapsAreRefusedByName) {
  StepLimits lim;
  lim.n_layer = 2;
  EXPECT_EQ(message(sample(), lim), "");
  StepCommand c = sample();
  c.taps[0].layer = 2;
  EXPECT_NE(message(c, lim).find("tap layer 2"), std::string::npos) << message(c, lim);
  c = sample();
  c.taps[0].point = model::TapPoint::kLogits;
  EXPECT_NE(message(c, lim).find("tap point 3"), std::string::npos) << message(c, lim);
  c = sample();
  c.taps[1] = c.taps[0];
  EXPECT_NE(message(c, lim).find("twice"), std::string::npos) << message(c, lim);
  c = sample();
  c.seqs[1].n_tap = 2;
  EXPECT_NE(message(c, lim).find("n_tap 2"), std::string::npos) << message(c, lim);
  lim.max_taps = 1;
  EXPECT_NE(message(sample(), lim).find("n_taps"), std::string::npos);
}

TEST(StepCommandTest, EveryTruncationIsRefused) {
  std::vector<std::byte> bytes;
  encodeStepCommand(sample(), bytes);
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_THROW(decodeStepCommand(std::span(bytes.data(), n), {}), Error) << n;
  }
  bytes.push_back(std::byte{0});
  EXPECT_THROW(decodeStepCommand(bytes, {}), Error);
}

TEST(StepCommandTest, HostileFieldsAreRefusedByName) {
  std::vector<std::byte> bytes;
  encodeStepCommand(sample(), bytes);
  auto expectMessage = [](std::vector<std::byte> b, const StepLimits& lim, const char* needle) {
    try {
      decodeStepCommand(b, lim);
      ADD_FAILURE() << "accepted, expected " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  auto bad_magic = bytes;
  bad_magic[0] = std::byte{0};
  expectMessage(bad_magic, {}, "magic");
  auto huge = bytes;  // n_seqs = 0xffffffff
  storeLE32(reinterpret_cast<uint8_t*>(huge.data()) + 16, 0xffffffffu);
  expectMessage(huge, {}, "n_seqs");
  StepLimits vocab;
  vocab.n_vocab = 6;
  expectMessage(bytes, vocab, "token id 6");
  StepLimits slots;
  slots.max_slot = 2;
  expectMessage(bytes, slots, "slot 3");
}

// Block tables are hostile too: an id beyond the cache, a table too short for the positions
// the chunk writes, or a chunk beyond the context is refused before any rank reads a block.
TEST(StepCommandTest, HostileBlockTablesAreRefused) {
  StepLimits lim;
  lim.kv_block_size = 4;
  lim.kv_blocks = 8;
  lim.max_ctx = 32;
  struct Case {
    std::string name;
    SeqChunk chunk;
    std::string needle;  // empty: accepted
  };
  const std::vector<Case> cases = {
      {"valid", {0, 4, 0, {1, 2, 3, 4}, {7, 3}}, ""},
      {"no table: the slot's blocks", {0, 4, 0, {1, 2}, {}}, ""},
      {"block id out of range", {0, 4, 0, {1, 2}, {7, 8}}, "KV block 8"},
      {"huge block id", {0, 0, 0, {1}, {0xffffffffu}}, "KV block 4294967295"},
      {"table too short", {0, 4, 0, {1, 2, 3, 4, 5}, {1, 2}}, "need 3"},
      {"beyond the context", {0, 30, 0, {1, 2, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 0}}, "context 32"},
      {"table longer than a context", {0, 0, 0, {1}, std::vector<uint32_t>(9, 0)}, "n_blocks"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    StepCommand cmd;
    cmd.seqs.push_back(c.chunk);
    const std::string got = message(cmd, lim);
    if (c.needle.empty()) {
      EXPECT_EQ(got, "");
    } else {
      EXPECT_NE(got.find(c.needle), std::string::npos) << got;
    }
  }
}

// Node 0 sends each slot's table once, then only the blocks appended since (kBlocksAppend); a
// worker's mirror gives every chunk its whole table again, step after step: a new sequence, its
// decode steps (no new block, then one), a cleared and reused slot, another sequence in the
// slot, one that extends the old table (a reused prefix), a GPU chunk with no table.
TEST(StepCommandTest, BlockTablesTravelAsAppendsAndComeBackWhole) {
  StepLimits lim;
  lim.kv_block_size = 4;
  lim.kv_blocks = 64;
  lim.max_ctx = 64;
  BlockTableMirror node0, worker;
  // (clear slots, chunks) per step; a chunk's table is what node 0 planned.
  struct Step {
    std::vector<uint32_t> clear;
    std::vector<SeqChunk> seqs;
    std::vector<size_t> wire_blocks;  // blocks each chunk carries on the wire
  };
  const std::vector<Step> steps = {
      {{}, {{0, 0, kLogitsLast, {1, 2, 3, 4, 5}, {9, 3}}, {1, 0, kLogitsLast, {1}, {5}}}, {2, 1}},
      {{}, {{0, 5, kLogitsLast, {6}, {9, 3}}, {1, 1, kLogitsLast, {2}, {5}}}, {0, 0}},
      {{}, {{0, 8, kLogitsLast, {6}, {9, 3, 11}}}, {1}},
      {{1}, {{1, 0, kLogitsLast, {7, 7}, {5}}}, {1}},                  // cleared: whole
      {{}, {{0, 0, kLogitsLast, {1, 2}, {4}}}, {1}},                   // another sequence
      {{}, {{0, 4, kLogitsLast, {1, 2, 3, 4, 5}, {4, 12, 13}}}, {2}},  // extends it
      {{}, {{0, 0, kLogitsLast, {1}, {}}}, {0}},                       // no table
      {{}, {{0, 1, kLogitsLast, {1}, {20}}}, {1}},
  };
  for (size_t i = 0; i < steps.size(); ++i) {
    SCOPED_TRACE(i);
    StepCommand planned;
    planned.step_id = i;
    planned.clear_slots = steps[i].clear;
    planned.seqs = steps[i].seqs;
    StepCommand wire = planned;
    node0.toWire(wire);
    for (size_t c = 0; c < wire.seqs.size(); ++c) {
      EXPECT_EQ(wire.seqs[c].blocks.size(), steps[i].wire_blocks[c]) << "chunk " << c;
    }
    std::vector<std::byte> bytes;
    encodeStepCommand(wire, bytes);
    StepCommand got = decodeStepCommand(bytes, lim);
    worker.fromWire(got, lim);
    ASSERT_EQ(got.seqs.size(), planned.seqs.size());
    for (size_t c = 0; c < got.seqs.size(); ++c) {
      EXPECT_EQ(got.seqs[c].blocks, planned.seqs[c].blocks) << "chunk " << c;
      EXPECT_EQ(got.seqs[c].flags, planned.seqs[c].flags) << "chunk " << c;
    }
  }
}

// Appends are hostile too: to a slot that holds no table (never named, cleared), past one
// context, or leaving the chunk's positions uncovered; refused by name.
TEST(StepCommandTest, HostileAppendsAreRefused) {
  StepLimits lim;
  lim.kv_block_size = 4;
  lim.kv_blocks = 64;
  lim.max_ctx = 16;  // 4 blocks
  auto refused = [&](BlockTableMirror& mirror, std::vector<uint32_t> clear, SeqChunk chunk,
                     const std::string& needle) {
    StepCommand c;
    c.clear_slots = std::move(clear);
    c.seqs.push_back(std::move(chunk));
    std::vector<std::byte> bytes;
    encodeStepCommand(c, bytes);
    try {
      StepCommand d = decodeStepCommand(bytes, lim);
      mirror.fromWire(d, lim);
      ADD_FAILURE() << "accepted, expected " << needle;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidData);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  auto holding = [&](std::vector<uint32_t> table) {
    BlockTableMirror m;
    StepCommand c;
    c.seqs.push_back({0, 0, kLogitsLast, {1}, std::move(table)});
    m.fromWire(c, lim);
    return m;
  };
  const uint32_t append = kLogitsLast | kBlocksAppend;
  BlockTableMirror empty;
  refused(empty, {}, {0, 0, append, {1}, {3}}, "holds no block table");
  BlockTableMirror cleared = holding({1});
  refused(cleared, {0}, {0, 4, append, {1}, {3}}, "holds no block table");
  BlockTableMirror full = holding({1, 2, 3});
  refused(full, {}, {0, 12, append, {1}, {4, 5}}, "more than one context");
  BlockTableMirror short_table = holding({1});
  refused(short_table, {}, {0, 4, append, {1, 2, 3, 4, 5}, {2}}, "need 3");
  StepCommand unknown;
  unknown.seqs.push_back({0, 0, 8, {1}, {}});
  EXPECT_NE(message(unknown, lim).find("unknown bits"), std::string::npos);
}

// Random damage to valid commands (appends among them) through decode and the worker's mirror:
// every result is a command or a tpnode::Error, never a crash or another exception, and a
// whole table that comes back always covers its chunk inside the cache.
TEST(StepCommandTest, DamagedCommandsAreRefusedOrSafe) {
  StepLimits lim;
  lim.kv_block_size = 4;
  lim.kv_blocks = 16;
  lim.max_ctx = 32;
  lim.max_slot = 3;
  lim.n_vocab = 100;
  BlockTableMirror node0;
  std::vector<std::vector<std::byte>> valid;
  for (uint32_t i = 0; i < 4; ++i) {
    StepCommand c;
    c.step_id = i;
    c.seqs.push_back({1, 4 * i, kLogitsLast, {1, 2, 3, 4}, {}});
    for (uint32_t b = 0; b <= i + 1; ++b) c.seqs[0].blocks.push_back(b);
    c.seqs.push_back({2, 0, kLogitsAll, {5}, {7}});
    node0.toWire(c);
    valid.emplace_back();
    encodeStepCommand(c, valid.back());
  }
  std::mt19937 rng(1234);
  int accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    BlockTableMirror worker;
    for (size_t k = 0; k < valid.size(); ++k) {
      std::vector<std::byte> b = valid[k];
      if (rng() % 2 == 0) {
        const int flips = 1 + static_cast<int>(rng() % 4);
        for (int f = 0; f < flips; ++f) {
          b[rng() % b.size()] = static_cast<std::byte>(rng() & 0xff);
        }
      }
      if (rng() % 8 == 0) b.resize(rng() % (b.size() + 1));
      try {
        StepCommand d = decodeStepCommand(b, lim);
        worker.fromWire(d, lim);
        ++accepted;
        for (const SeqChunk& s : d.seqs) {
          EXPECT_EQ(s.flags & kBlocksAppend, 0u);
          EXPECT_LE(s.start_pos + s.tokens.size(), lim.max_ctx);
          if (s.blocks.empty()) continue;
          EXPECT_GE(s.blocks.size() * lim.kv_block_size, s.start_pos + s.tokens.size());
          for (uint32_t id : s.blocks) EXPECT_LT(id, lim.kv_blocks);
        }
      } catch (const Error&) {
        // refused by name: fine
      }
    }
  }
  EXPECT_GT(accepted, 0);
}

TEST(StepCommandTest, ReadTensorRoundTripsAndIsChecked) {
  StepCommand c;
  c.kind = StepKind::kReadTensor;
  c.step_id = 7;
  c.tensor = 12;
  std::vector<std::byte> bytes;
  encodeStepCommand(c, bytes);
  EXPECT_EQ(bytes.size(), 28u);
  StepLimits lim;
  lim.n_tensors = 13;
  StepCommand d = decodeStepCommand(bytes, lim);
  EXPECT_EQ(d.kind, StepKind::kReadTensor);
  EXPECT_EQ(d.tensor, 12u);
  EXPECT_TRUE(d.seqs.empty());
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_THROW(decodeStepCommand(std::span(bytes.data(), n), lim), Error) << n;
  }
  lim.n_tensors = 12;  // index out of range
  EXPECT_THROW(decodeStepCommand(bytes, lim), Error);
  try {
    decodeStepCommand(bytes, lim);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 12"), std::string::npos) << e.what();
  }
  // A read-tensor command may not carry sequences or clears.
  StepCommand mixed = sample();
  mixed.kind = StepKind::kReadTensor;
  encodeStepCommand(mixed, bytes);
  EXPECT_THROW(decodeStepCommand(bytes, {}), Error);
  // An unknown kind is refused.
  encodeStepCommand(c, bytes);
  storeLE16(reinterpret_cast<uint8_t*>(bytes.data()) + 6, 7);
  EXPECT_THROW(decodeStepCommand(bytes, {}), Error);
}

// A pipeline's retire command: a step number and nothing else.
TEST(StepCommandTest, RetireRoundTripsAndCarriesNoSequences) {
  StepCommand c;
  c.kind = StepKind::kRetire;
  c.step_id = 9;
  std::vector<std::byte> bytes;
  encodeStepCommand(c, bytes);
  EXPECT_EQ(bytes.size(), 24u);
  StepCommand d = decodeStepCommand(bytes, {});
  EXPECT_EQ(d.kind, StepKind::kRetire);
  EXPECT_EQ(d.step_id, 9u);
  StepCommand mixed = sample();
  mixed.kind = StepKind::kRetire;
  encodeStepCommand(mixed, bytes);
  try {
    decodeStepCommand(bytes, {});
    ADD_FAILURE() << "a retire command with sequences was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("retire command carries"), std::string::npos) << e.what();
  }
}

// The Redis KV tier's command: blocks to store and to load, each id checked against the cache.
TEST(StepCommandTest, KvTierRoundTripsAndChecksBlocks) {
  StepCommand c;
  c.kind = StepKind::kKvTier;
  c.step_id = 9;
  c.stores = {{0x1122334455667788ull, 3}, {7, 0}};
  c.loads = {{0xfedcba9876543210ull, 5}};
  std::vector<std::byte> bytes;
  encodeStepCommand(c, bytes);
  StepLimits limits;
  limits.kv_blocks = 8;
  StepCommand d = decodeStepCommand(bytes, limits);
  EXPECT_EQ(d.kind, StepKind::kKvTier);
  EXPECT_EQ(d.stores, c.stores);
  EXPECT_EQ(d.loads, c.loads);
  limits.kv_blocks = 5;  // block 5 is outside
  EXPECT_THROW(decodeStepCommand(bytes, limits), Error);
  limits.kv_blocks = 1;  // more blocks than the cache has
  EXPECT_THROW(decodeStepCommand(bytes, limits), Error);
  // Truncated, or with sequences: refused.
  limits.kv_blocks = 8;
  EXPECT_THROW(decodeStepCommand(std::span(bytes.data(), bytes.size() - 1), limits), Error);
  StepCommand mixed = c;
  mixed.seqs.push_back(SeqChunk{0, 0, 0, {1}, {}});
  encodeStepCommand(mixed, bytes);
  EXPECT_THROW(decodeStepCommand(bytes, limits), Error);
}

}  // namespace
}  // namespace tpnode::node
