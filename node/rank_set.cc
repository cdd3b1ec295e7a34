#include "node/rank_set.h"

#include <chrono>

#include <spdlog/spdlog.h>

#include "common/error.h"
#include "model/kernels/cpu/thread_pool.h"
#include "model/weights.h"
#include "node/placement.h"

namespace tpnode::node {

struct RankSet::Rank {
  int local_rank = 0;
  std::unique_ptr<collectives::Communicator> comm;
  std::unique_ptr<model::kernels::ThreadPool> pool;
  std::unique_ptr<model::LlamaRank> model;
  std::vector<float> scratch_logits;
  uint64_t weight_bytes = 0;
  std::thread thread;
};

RankSet::RankSet(const model::GgufFile& file, const model::ModelConfig& config,
                 const model::ShardPlan& plan, std::shared_ptr<collectives::NodeGroup> group,
                 const RankSetOptions& options)
    : cpu_of_rank_(options.cpu_of_rank), group_(std::move(group)) {
  const int tp = group_->localSize();
  const int first = group_->nodeId() * tp;
  auto t0 = std::chrono::steady_clock::now();
  spdlog::info("[model] loading {} local rank shards (global ranks {}..{} of {})", tp, first,
               first + tp - 1, plan.tp);
  // Load in parallel: each rank copies only its own slice out of the mapped file.
  std::vector<model::RankWeights> weights(static_cast<size_t>(tp));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(tp));
  {
    std::vector<std::jthread> loaders;
    for (int r = 0; r < tp; ++r) {
      loaders.emplace_back([&, r] {
        try {
          weights[static_cast<size_t>(r)] = model::loadRankWeights(file, config, plan, first + r);
        } catch (...) {
          errors[static_cast<size_t>(r)] = std::current_exception();
        }
      });
    }
  }
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  for (int r = 0; r < tp; ++r) {
    auto rank = std::make_unique<Rank>();
    rank->local_rank = r;
    rank->weight_bytes = plan.rankBytes(first + r);
    rank->comm = group_->communicator(r);
    rank->pool = std::make_unique<model::kernels::ThreadPool>(std::max(1, options.threads));
    rank->model =
        std::make_unique<model::LlamaRank>(config, std::move(weights[static_cast<size_t>(r)]),
                                           *rank->comm, *rank->pool, options.slots, options.ctx);
    spdlog::info(
        "[model] rank {} (local {}): {:.1f} MiB weights, {:.1f} MiB KV cache "
        "({} slots x {} positions), {} threads",
        first + r, r, rank->weight_bytes / 1048576.0, rank->model->kvBytes() / 1048576.0,
        options.slots, options.ctx, options.threads);
    ranks_.push_back(std::move(rank));
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("[model] local ranks ready in {:.2f} s", secs);
  for (auto& rank : ranks_) {
    Rank* raw = rank.get();
    raw->thread = std::thread([this, raw] { rankLoop(*raw); });
  }
}

RankSet::~RankSet() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& r : ranks_) {
    if (r->thread.joinable()) r->thread.join();
  }
}

uint64_t RankSet::rankWeightBytes(int r) const {
  return ranks_[static_cast<size_t>(r)]->weight_bytes;
}

uint64_t RankSet::rankKvBytes(int r) const {
  return ranks_[static_cast<size_t>(r)]->model->kvBytes();
}

void RankSet::run(std::span<const model::BatchToken> batch, std::vector<float>& logits) {
  std::unique_lock lock(mu_);
  if (error_) std::rethrow_exception(error_);
  batch_ = batch;
  logits_ = &logits;
  pending_ = static_cast<int>(ranks_.size());
  ++generation_;
  work_cv_.notify_all();
  done_cv_.wait(lock, [&] { return pending_ == 0; });
  if (error_) std::rethrow_exception(error_);
}

void RankSet::rankLoop(Rank& rank) {
  if (static_cast<size_t>(rank.local_rank) < cpu_of_rank_.size()) {
    pinThisThread(cpu_of_rank_[static_cast<size_t>(rank.local_rank)]);
  }
  uint64_t seen = 0;
  for (;;) {
    std::span<const model::BatchToken> batch;
    std::vector<float>* out = nullptr;
    {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      batch = batch_;
      out = rank.local_rank == 0 ? logits_ : &rank.scratch_logits;
    }
    std::exception_ptr failure;
    try {
      rank.model->forward(batch, *out);
    } catch (const Error& e) {
      failure = std::current_exception();
      group_->abort(e.code(), e.what());
    } catch (const std::exception& e) {
      failure = std::current_exception();
      group_->abort(ErrorCode::kInternal, e.what());
    }
    std::lock_guard lock(mu_);
    if (failure && !error_) error_ = failure;
    if (--pending_ == 0) done_cv_.notify_all();
  }
}

}  // namespace tpnode::node
