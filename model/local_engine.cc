#include "model/local_engine.h"

#include <chrono>
#include <exception>
#include <mutex>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "model/kernels/cpu/thread_pool.h"
#include "model/llama_rank.h"
#include "model/weights.h"

namespace tpnode::model {

struct LocalEngine::Rank {
  collectives::Communicator* comm;
  std::unique_ptr<kernels::ThreadPool> pool;
  std::unique_ptr<RankModel> model;
};

int32_t greedyPick(const float* logits, int64_t n_vocab) {
  int64_t best = 0;
  for (int64_t i = 1; i < n_vocab; ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return static_cast<int32_t>(best);
}

template <typename F>
void LocalEngine::onAllRanks(F&& fn) {
  std::vector<std::thread> threads;
  std::mutex mu;
  std::exception_ptr first;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(*ranks_[r], static_cast<int>(r));
      } catch (...) {
        std::lock_guard lock(mu);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

LocalEngine::LocalEngine(const GgufFile& file, const ModelConfig& config, const ShardPlan& plan,
                         std::vector<collectives::Communicator*> comms, EngineOptions options)
    : config_(config) {
  if (static_cast<int>(comms.size()) != plan.tp) {
    fail(ErrorCode::kInvalidArgument, "{} communicators for tp={}", comms.size(), plan.tp);
  }
  for (collectives::Communicator* c : comms) {
    auto r = std::make_unique<Rank>();
    r->comm = c;
    r->pool = std::make_unique<kernels::ThreadPool>(std::max(1, options.threads));
    ranks_.push_back(std::move(r));
  }
  onAllRanks([&](Rank& r, int rank) {
    RankWeights w = loadRankWeights(file, config, plan, rank, options.pack_weights);
    if (options.make_rank) {
      r.model = options.make_rank(rank, config, std::move(w), *r.comm);
    } else {
      r.model =
          std::make_unique<LlamaRank>(config, std::move(w), *r.comm, *r.pool, 1, options.n_ctx);
    }
  });
}

LocalEngine::~LocalEngine() = default;

GenerationResult LocalEngine::generate(const GenerationRequest& req, const TokenPicker& picker) {
  if (req.prompt.empty()) fail(ErrorCode::kInvalidArgument, "the prompt has no tokens");
  GenerationResult result;
  onAllRanks([&](Rank& r, int rank) { runRank(r, req, picker, rank == 0 ? &result : nullptr); });
  return result;
}

void LocalEngine::runRank(Rank& r, const GenerationRequest& req, const TokenPicker& picker,
                          GenerationResult* out) {
  using Clock = std::chrono::steady_clock;
  const int64_t vocab = config_.n_vocab;
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < req.prompt.size(); ++i) {
    bool last = i + 1 == req.prompt.size();
    batch.push_back({req.prompt[i], static_cast<int32_t>(i), 0, req.all_logits || last});
  }
  std::vector<float> logits;
  auto t0 = Clock::now();
  r.model->forward(batch, logits);
  double prefill = std::chrono::duration<double>(Clock::now() - t0).count();
  if (out) {
    out->prefill_seconds = prefill;
    if (req.all_logits) out->logits = logits;
  }
  const int64_t rows = static_cast<int64_t>(logits.size()) / vocab;
  std::vector<float> last;  // empty on ranks that do not compute logits (replicated head)
  if (rows > 0) last.assign(logits.end() - vocab, logits.end());
  int32_t pos = static_cast<int32_t>(req.prompt.size());
  double decode = 0;
  int64_t steps = 0;
  int64_t total_rows = rows;
  for (int step = 0; step < req.n_predict; ++step) {
    float tok = 0;
    if (r.comm->rank() == 0) {
      size_t s = static_cast<size_t>(step);
      tok = static_cast<float>(s < req.forced.size() ? req.forced[s] : picker(last.data(), vocab));
    }
    if (r.comm->size() > 1) r.comm->broadcast(&tok, 1, collectives::DType::kF32, 0);
    const int32_t id = static_cast<int32_t>(tok);
    if (out) out->ids.push_back(id);
    if (step + 1 == req.n_predict && !req.all_logits) break;
    BatchToken t{id, pos++, 0, true};
    auto t1 = Clock::now();
    r.model->forward(std::span<const BatchToken>(&t, 1), logits);
    decode += std::chrono::duration<double>(Clock::now() - t1).count();
    ++steps;
    last.assign(logits.begin(), logits.end());
    if (out && req.all_logits) out->logits.insert(out->logits.end(), logits.begin(), logits.end());
    ++total_rows;
  }
  if (out) {
    out->decode_seconds = decode;
    out->decode_steps = steps;
    out->logit_rows = req.all_logits ? total_rows : 0;
  }
}

}  // namespace tpnode::model
