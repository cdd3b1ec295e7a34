// Step batch: a StepCommand's sequence chunks as the forward batch every rank runs, written
// once for node 0 (the Driver) and the workers, so that both run exactly the same tokens and
// agree on which of them produce a logits row.
//
// Contract
// - Pure functions: no state, any thread.
// - Batch order is chunk order, then token order inside a chunk; logits rows come back in the
//   same order (RankSet::run), logitRows() of each chunk in turn.
#pragma once

#include <cstddef>
#include <vector>

#include "model/rank_model.h"
#include "node/step_command.h"

namespace tpnode::node {

// Replaces `batch` with the tokens of command.seqs (slot, position, the logits flag and the
// tap flag of each: the first n_tap tokens of a chunk).
void expandStep(const StepCommand& command, std::vector<model::BatchToken>& batch);

// Logits rows chunk `c` produces: every token (kLogitsAll), its last (kLogitsLast) or none.
size_t logitRows(const SeqChunk& c);

}  // namespace tpnode::node
