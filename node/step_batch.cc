#include "node/step_batch.h"

namespace tpnode::node {

void expandStep(const StepCommand& command, std::vector<model::BatchToken>& batch) {
  batch.clear();
  for (const SeqChunk& c : command.seqs) {
    for (size_t j = 0; j < c.tokens.size(); ++j) {
      bool last = j + 1 == c.tokens.size();
      bool want = (c.flags & kLogitsAll) || ((c.flags & kLogitsLast) && last);
      batch.push_back({c.tokens[j], static_cast<int32_t>(c.start_pos + j),
                       static_cast<int32_t>(c.slot), want, j < c.n_tap, c.blocks});
    }
  }
}

size_t logitRows(const SeqChunk& c) {
  return (c.flags & kLogitsAll) ? c.tokens.size() : ((c.flags & kLogitsLast) ? 1 : 0);
}

}  // namespace tpnode::node
