// The pipeline stages' message: the hidden state of one micro-batch of a step, passed from a
// stage to the next (kForward: a row per batch token), or from the last stage back to stage 0
// (kReturn: the rows of the tokens marked `logits`, in batch order), or a stage's report of a
// step from its first node to node 0: its activation taps (kTaps: for each of the step's taps
// on the stage's layers, in the step command's order, the rows of the tokens marked `tap`) and,
// for a mixture of experts, its expert load (kExperts: for each rank of the stage, the
// token-expert pairs routed to its experts since it loaded, u64; rows = ranks, cols = 2 words,
// encodeExpertLoad()). A stage whose step fails
// sends kAbort (no rows) where its output would have gone, so that the stages after it, and
// stage 0, stop waiting at once. The Redis KV tier (node/kv_tier_rank.h): after a kKvTier
// command that loads blocks, the first node of every later stage sends node 0 its stage's
// result on kTagPipelineTier (kTierLoads: step = the session's KV tier round, from 1; rows =
// the command's loads, cols = 1; per load f32 1 when every rank of the stage imported the
// block, else 0; encodeTierLoads()); a stage whose tier round fails sends kAbort there.
// Defined once here and in docs/wire-protocol.md ("Pipeline stages").
//
// Layout (little-endian, field by field; 32-byte header, then rows x cols f32):
//   0 u32 magic 0x53485054 ("TPHS")   4 u16 version (1)     6 u16 kind (1 forward, 2 return,
//                                                                     3 abort, 4 taps,
//                                                                     5 experts, 6 tier loads)
//   8 u64 step (the session's step number, from 1; kTierLoads: its tier round)
//  16 u32 micro-batch index          20 u32 micro-batch count
//  24 u32 rows                       28 u32 cols (n_embd)
//  32 rows * cols f32
//
// Received bytes are hostile: decodeHidden() checks every header field against what the
// receiver expects from the step it runs (kind, step, micro-batch, rows, cols) and the exact
// size before it reads a float, and throws Error(kInvalidData) naming the field and both values;
// an abort throws Error(kPeerLost).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "mesh/tags.h"

namespace tpnode::node {

inline constexpr uint32_t kTagPipelineForward = mesh::kPipelineTags.at(0);  // stage s -> s + 1
inline constexpr uint32_t kTagPipelineReturn = mesh::kPipelineTags.at(1);   // last -> stage 0
inline constexpr uint32_t kTagPipelineTensor =
    mesh::kPipelineTags.at(2);  // node/stage_tensor_read.h
inline constexpr uint32_t kTagPipelineReport = mesh::kPipelineTags.at(3);  // stage -> node 0
inline constexpr uint32_t kTagPipelineTier = mesh::kPipelineTags.at(4);    // stage -> node 0

inline constexpr uint32_t kHiddenMagic = 0x53485054;
inline constexpr uint16_t kHiddenVersion = 1;
inline constexpr size_t kHiddenHeaderBytes = 32;

enum class HiddenKind : uint16_t {
  kForward = 1,
  kReturn = 2,
  kAbort = 3,
  kTaps = 4,
  kExperts = 5,
  kTierLoads = 6,
};

struct HiddenHeader {
  HiddenKind kind = HiddenKind::kForward;
  uint64_t step = 0;
  uint32_t micro = 0, micros = 1;
  uint32_t rows = 0, cols = 0;
};

// The message's size for `rows` x `cols`.
size_t hiddenMessageBytes(uint32_t rows, uint32_t cols);

// Header and rows x cols floats (`data`, at least that many) into `out` (resized).
void encodeHidden(const HiddenHeader& header, const float* data, std::vector<std::byte>& out);

// Checks `bytes` against `expected` (every field) and copies the floats into `out`
// (rows x cols). Error(kInvalidData) on any difference; Error(kPeerLost) for an abort.
void decodeHidden(std::span<const std::byte> bytes, const HiddenHeader& expected,
                  std::vector<float>& out);

// kExperts: `pairs` (one u64 per rank of the stage) after step `step`, and back; the decoder
// checks the header as decodeHidden() does (`ranks` rows).
void encodeExpertLoad(uint64_t step, std::span<const uint64_t> pairs, std::vector<std::byte>& out);
std::vector<uint64_t> decodeExpertLoad(std::span<const std::byte> bytes, uint64_t step,
                                       uint32_t ranks);

// kTierLoads: a stage's result of tier round `round` (one flag per load), and back; the decoder
// checks the header as decodeHidden() does (`loads` rows) and that every flag is 0 or 1.
void encodeTierLoads(uint64_t round, const std::vector<bool>& loaded, std::vector<std::byte>& out);
std::vector<bool> decodeTierLoads(std::span<const std::byte> bytes, uint64_t round, uint32_t loads);

}  // namespace tpnode::node
