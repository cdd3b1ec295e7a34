// Tensor reads in a pipeline split: the stage that holds a tensor (model::StagePlan::
// stageHolding) gathers it over its own ranks (RankSet::gatherTensor, every node of the stage
// taking part) and, when that stage is not node 0's, its first node sends it to node 0 on
// kTagPipelineTensor (node/pipeline_wire.h).
//
// Wire (little-endian): one message `u32 magic 'TPTR' (0x52545054) | u16 version (1) |
// u16 status (0 ok, 1 refused) | u64 length`, followed, in the same message, by the reason
// (status 1: `length` bytes of text, at most 2048); for status 0 the tensor's `length` GGUF
// bytes follow in messages of at most kTensorChunkBytes each. Node 0 checks the header and
// that `length` is the tensor's size before it receives a byte of it.
//
// Contract: node 0's Driver calls receiveStageTensor() after it sent kReadTensor to the holding
// stage's nodes only; the stage's first node calls answerStageTensorRead(), the others
// RankSet::gatherTensor without assembling. All on their step-loop threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mesh/mesh.h"
#include "model/shard_plan.h"
#include "node/rank_set.h"

namespace tpnode::node {

inline constexpr size_t kTensorChunkBytes = size_t{64} << 20;

// Worker: gathers `shard` over this node's ranks and sends it (or why it cannot) to node 0.
void answerStageTensorRead(mesh::Mesh& mesh, RankSet& ranks, const model::TensorShard& shard);

// Node 0: the tensor's bytes from `node`; a refusal is returned in `refusal` (bytes empty).
// Error(kInvalidData) for a malformed answer, Error(kPeerLost) from the mesh.
std::vector<uint8_t> receiveStageTensor(mesh::Mesh& mesh, int node, const model::TensorShard& shard,
                                        std::string& refusal);

}  // namespace tpnode::node
