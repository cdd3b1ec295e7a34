// Tensor reads: the pure functions behind "read a parameter of a sharded model". Each rank
// turns what it holds of a tensor back into GGUF bytes of its slice (shardBytes); the ranks
// all-gather those slices (equal sizes on every rank, see ShardPlan); any rank can then put the
// full tensor back together in the unsharded (tp=1) model's order (assembleTensor).
//
// Semantics (docs/inspection.md)
// - The bytes are what the rank computes with, not a re-read of the file: a projection stored
//   4-row interleaved for the kernels is de-interleaved; a 1-D tensor the rank keeps as f32
//   (norms, biases) is encoded back into its GGUF type (F32 as is; F16 and BF16 round-trip
//   exactly; other types are refused with Error(kUnsupported)).
// - Replicated tensors pass through (global rank 0's copy). Split rows / split columns are
//   concatenated on their dimension. KV heads replicated for tp (pieces < tp) are taken once,
//   from the first rank that holds each piece. The plan pads nothing (the vocabulary is split
//   only when it divides by tp), so no rows are dropped.
// - Stacked expert tensors (ffn_*_exps): a rank's slice is its part of each expert it holds, in
//   expert order; assembled, the whole [experts][rows][cols] tensor in the file's order.
// - Derived copies that are not GGUF tensors (a tied head's vocab slice) are not listed.
//
// Threading: pure functions; a RankWeights is read-only here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/gguf.h"
#include "model/shard_plan.h"
#include "model/weights.h"

namespace tpnode::model {

// Why `shard.tensor` cannot be read from these weights ("" when it can): no such tensor held
// (a file tensor tpnode does not load), or a 1-D tensor whose type cannot be rebuilt. Cheap.
std::string readRefusal(const RankWeights& w, const TensorShard& shard);

// This rank's slice of `shard.tensor` as GGUF bytes: the rows of sliceFor(rank, tp) in order,
// each the columns of the slice. Size == shard.bytesFor(w.rank, w.tp). Throws
// Error(kInvalidArgument) when the rank holds no tensor of that name.
std::vector<uint8_t> shardBytes(const RankWeights& w, const TensorShard& shard);

// The full tensor (tp=1 order, GGUF bytes) from the slices of every rank, concatenated in rank
// order (what an all-gather gives): `gathered` holds tp slices of `slice_bytes` each (extra
// trailing padding per slice allowed: `stride` bytes between slice starts).
std::vector<uint8_t> assembleTensor(const TensorShard& shard, int tp, const uint8_t* gathered,
                                    size_t stride);

// GGUF bytes of a whole tensor -> f32, element order unchanged (row-major [rows][cols]).
// Throws Error(kUnsupported) for a type without a dequantiser.
std::vector<float> dequantizeTensor(TensorType type, const uint8_t* bytes, uint64_t rows,
                                    uint64_t cols);

// The numpy shape gguf-py gives a tensor: ne reversed, n_dims of them ([ne1, ne0] for 2-D).
std::vector<uint64_t> numpyShape(const GgufTensorInfo& info);

}  // namespace tpnode::model
