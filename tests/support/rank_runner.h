// RankRunner: a model's tp ranks in this test process, run through node::RankSet (the engine
// tpnode itself runs, on one node with no mesh), for the model tests: one sequence in slot 0,
// its prompt in one batch, then greedy (or teacher-forced) decoding one token per step.
//
// Contract
// - The file, config and plan outlive the runner; generate() is called from one thread at a
//   time (RankSet::run's contract). Each generate() starts again at position 0 of slot 0.
// - Logits: every row the request asks for, in position order, [rows][n_vocab]; ranks with
//   GPU devices (options.gpu_of_rank) run the same way (model/cuda/gpu_node.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "collectives/hierarchical.h"
#include "common/error.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/shard_plan.h"
#include "node/rank_set.h"

namespace tpnode::testing_support {

// Argmax, ties to the lowest id.
inline int32_t greedyPick(const float* logits, int64_t n_vocab) {
  int64_t best = 0;
  for (int64_t i = 1; i < n_vocab; ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return static_cast<int32_t>(best);
}

// Picks the next token from a logits row.
using TokenPicker = std::function<int32_t(const float* logits, int64_t n_vocab)>;

struct RunRequest {
  std::vector<int32_t> prompt;
  int n_predict = 0;
  bool all_logits = false;      // keep a logits row for every prompt and generated position
  std::vector<int32_t> forced;  // teacher forcing: take these as the generated tokens
};

struct RunResult {
  std::vector<int32_t> ids;   // generated
  std::vector<float> logits;  // [rows][n_vocab] when all_logits
  int64_t logit_rows = 0;
};

class RankRunner {
 public:
  RankRunner(const model::GgufFile& file, const model::ModelConfig& config,
             const model::ShardPlan& plan, const node::RankSetOptions& options)
      : n_vocab_(config.n_vocab),
        ranks_(file, config, plan,
               collectives::NodeGroup::create(nullptr, plan.tp, collectives::CollectiveOptions{}),
               options) {}

  RunResult generate(const RunRequest& req, const TokenPicker& picker = greedyPick) {
    if (req.prompt.empty()) fail(ErrorCode::kInvalidArgument, "the prompt has no tokens");
    RunResult out;
    std::vector<model::BatchToken> batch;
    for (size_t i = 0; i < req.prompt.size(); ++i) {
      const bool last = i + 1 == req.prompt.size();
      batch.push_back({req.prompt[i], static_cast<int32_t>(i), 0, req.all_logits || last});
    }
    std::vector<float> logits;
    ranks_.run(batch, logits);
    if (req.all_logits) out.logits = logits;
    int64_t rows = static_cast<int64_t>(logits.size()) / n_vocab_;
    std::vector<float> last(logits.end() - n_vocab_, logits.end());
    int32_t pos = static_cast<int32_t>(req.prompt.size());
    for (int step = 0; step < req.n_predict; ++step) {
      const size_t s = static_cast<size_t>(step);
      const int32_t id = s < req.forced.size() ? req.forced[s] : picker(last.data(), n_vocab_);
      out.ids.push_back(id);
      if (step + 1 == req.n_predict && !req.all_logits) break;
      const model::BatchToken t{id, pos++, 0, true};
      ranks_.run(std::span<const model::BatchToken>(&t, 1), logits);
      last.assign(logits.begin(), logits.end());
      if (req.all_logits) out.logits.insert(out.logits.end(), logits.begin(), logits.end());
      ++rows;
    }
    out.logit_rows = req.all_logits ? rows : 0;
    return out;
  }

 private:
  const int64_t n_vocab_;
  node::RankSet ranks_;
};

}  // namespace tpnode::testing_support
