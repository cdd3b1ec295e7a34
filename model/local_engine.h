// LocalEngine: tp ranks of one model in this process, one thread per rank, each with its own
// weights shard, KV cache and compute thread pool, meeting through the given communicators.
// Generation runs in lockstep: every rank evaluates the same batches; global rank 0 picks
// each next token (the `picker`, greedy by default) and broadcasts it.
//
// Contract
// - communicators[r] is rank r's Communicator; they must outlive the engine and belong to
//   one group of size tp (a SoloCommunicator for tp=1).
// - generate() is called from one thread at a time; it starts tp rank threads for the call
//   (weights and pools persist across calls). An Error on any rank is rethrown on the caller.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "collectives/communicator.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/shard_plan.h"
#include "model/weights.h"

namespace tpnode::model {

class RankModel;

// Builds global rank r's model from its weights (GPU ranks: model/cuda/gpu_node.h).
using RankFactory = std::function<std::unique_ptr<RankModel>(
    int rank, const ModelConfig& config, RankWeights weights, collectives::Communicator& comm)>;

struct EngineOptions {
  int threads = 1;       // compute threads per rank (CPU ranks)
  int64_t n_ctx = 2048;  // positions per sequence
  // Empty: CPU ranks (LlamaRank). Otherwise called once per rank, on that rank's thread, with
  // weights loaded plain (loadRankWeights pack=false) when pack_weights is false.
  RankFactory make_rank;
  bool pack_weights = true;
};

struct GenerationRequest {
  std::vector<int32_t> prompt;
  int n_predict = 0;
  bool all_logits = false;      // keep a logits row for every prompt and generated position
  std::vector<int32_t> forced;  // teacher forcing: take these as the generated tokens
};

struct GenerationResult {
  std::vector<int32_t> ids;   // generated
  std::vector<float> logits;  // [rows][n_vocab] when all_logits
  int64_t logit_rows = 0;
  double prefill_seconds = 0, decode_seconds = 0;
  int64_t decode_steps = 0;
};

// Picks the next token from a logits row (runs on global rank 0 only).
using TokenPicker = std::function<int32_t(const float* logits, int64_t n_vocab)>;
int32_t greedyPick(const float* logits, int64_t n_vocab);  // argmax, ties to the lowest id

class LocalEngine {
 public:
  LocalEngine(const GgufFile& file, const ModelConfig& config, const ShardPlan& plan,
              std::vector<collectives::Communicator*> communicators, EngineOptions options);
  ~LocalEngine();
  LocalEngine(const LocalEngine&) = delete;
  LocalEngine& operator=(const LocalEngine&) = delete;

  GenerationResult generate(const GenerationRequest& request,
                            const TokenPicker& picker = greedyPick);
  const ModelConfig& config() const { return config_; }

 private:
  struct Rank;
  void runRank(Rank& rank, const GenerationRequest& request, const TokenPicker& picker,
               GenerationResult* result);
  template <typename F>
  void onAllRanks(F&& fn);

  ModelConfig config_;
  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace tpnode::model
