#include "node/rank_set.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include <spdlog/spdlog.h>

#include "collectives/topology.h"
#include "common/error.h"
#include "model/kernels/cpu/thread_pool.h"
#include "model/tensor_read.h"
#include "model/weights.h"
#include "node/placement.h"

namespace tpnode::node {

struct RankSet::Rank {
  int local_rank = 0;
  std::unique_ptr<collectives::Communicator> comm;
  std::unique_ptr<model::kernels::ThreadPool> pool;
  std::unique_ptr<model::RankModel> model;
  std::vector<float> scratch_logits;
  std::unique_ptr<RankKvTier> tier;  // --kv-cache-redis-url
  uint64_t weight_bytes = 0;
  std::thread thread;
};

RankSet::RankSet(const model::GgufFile& file, const model::ModelConfig& config,
                 const model::ShardPlan& plan, std::shared_ptr<collectives::NodeGroup> group,
                 const RankSetOptions& options)
    : cpu_of_rank_(options.cpu_of_rank),
      read_chunk_(std::max<size_t>(2, options.read_chunk_bytes & ~size_t{1})),
      group_(std::move(group)) {
  const collectives::Topology& topo = group_->topology();
  const int tp = topo.ranksPerNode();
  auto t0 = std::chrono::steady_clock::now();
  for (const model::TensorShard& s : plan.shards) {
    if (s.tensor.experts <= 1) continue;  // the first stacked expert tensor: its expert map
    for (int g = 0; g < plan.tp; ++g) {
      const model::Slice sl = s.sliceFor(g, plan.tp);
      experts_of_rank_.emplace_back(sl.expert_begin, sl.expert_end);
    }
    break;
  }
  const bool gpu = !options.gpu_of_rank.empty();
  if (gpu && config.isMoe()) {
    fail(ErrorCode::kUnsupported,
         "{} is a mixture-of-experts model ({} experts); GPU ranks run dense models only: use "
         "--backend cpu",
         config.arch, config.n_expert);
  }
  const model::StagePart* part = options.stage ? &*options.stage : nullptr;
  spdlog::info("[model] loading {} local rank shards (global ranks {}..{} of {}) for {} ranks", tp,
               topo.firstRank(), topo.globalRank(tp - 1), plan.tp, gpu ? "GPU" : "CPU");
  // Load in parallel: each rank copies only its own slice out of the mapped file.
  std::vector<model::RankWeights> weights(static_cast<size_t>(tp));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(tp));
  {
    std::vector<std::jthread> loaders;
    for (int r = 0; r < tp; ++r) {
      loaders.emplace_back([&, r] {
        try {
          weights[static_cast<size_t>(r)] =
              model::loadRankWeights(file, config, plan, topo.globalRank(r), /*pack=*/!gpu, part);
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
    rank->weight_bytes = part != nullptr ? weights[static_cast<size_t>(r)].bytes
                                         : plan.rankBytes(topo.globalRank(r));
    rank->comm = group_->communicator(r);
    ranks_.push_back(std::move(rank));
  }
  if (gpu) {
    model::GpuNodeOptions g;
    g.devices = options.gpu_of_rank;
    g.transport = options.local_transport;
    g.inter_transport = options.inter_transport;
    g.graphs = options.cuda_graphs;
    // Decode steps and short prefills in one call; longer all-reduces go in pieces.
    g.max_allreduce_floats = static_cast<size_t>(config.n_embd) * options.allreduce_piece_rows;
    std::vector<collectives::Communicator*> comms;
    for (auto& rank : ranks_) comms.push_back(rank->comm.get());
    gpu_ = model::GpuNode::create(comms, g);
  }
  for (int r = 0; r < tp; ++r) {
    Rank* rank = ranks_[static_cast<size_t>(r)].get();
    model::RankWeights& w = weights[static_cast<size_t>(r)];
    if (gpu) {
      rank->model = gpu_->makeRank(r, config, std::move(w), options.slots, options.ctx,
                                   options.kv_block_size, options.kv_blocks);
    } else {
      rank->pool = std::make_unique<model::kernels::ThreadPool>(std::max(1, options.threads));
      rank->model = std::make_unique<model::LlamaRank>(config, std::move(w), *rank->comm,
                                                       *rank->pool, options.slots, options.ctx,
                                                       options.kv_block_size, options.kv_blocks);
    }
    rank->model->reserveBatch(options.reserve_tokens);
    spdlog::info(
        "[model] rank {} (local {}) on {}: {:.1f} MiB weights, {:.1f} MiB KV cache "
        "({}){}",
        topo.globalRank(r), r, rank->model->backend(), rank->weight_bytes / 1048576.0,
        rank->model->kvBytes() / 1048576.0,
        fmt::format("{} blocks of {} positions", options.kv_blocks, options.kv_block_size),
        gpu ? "" : fmt::format(", {} threads", options.threads));
    if (options.kv_tier && rank->model->pagedKvCache() != nullptr) {
      rank->tier = std::make_unique<RankKvTier>(*options.kv_tier,
                                                options.stage_first_rank + topo.globalRank(r),
                                                rank->model->pagedKvCache()->blockFloats());
    }
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

uint64_t RankSet::rankDeviceBytes(int r) const {
  return ranks_[static_cast<size_t>(r)]->model->deviceBytes();
}

std::string RankSet::rankBackend(int r) const {
  return ranks_[static_cast<size_t>(r)]->model->backend();
}

std::string RankSet::gpuTransport() const {
  return gpu_ ? gpu_->transportName() : "";
}

void RankSet::run(std::span<const model::BatchToken> batch, std::vector<float>& logits,
                  model::TapSink* taps) {
  submit(Job::kForward, batch, nullptr, logits, taps);
}

void RankSet::runLayers(std::span<const model::BatchToken> batch, const float* hidden_in,
                        std::vector<float>& hidden_out, model::TapSink* taps) {
  submit(Job::kLayers, batch, hidden_in, hidden_out, taps);
}

void RankSet::runHead(std::span<const model::BatchToken> batch, const float* rows,
                      std::vector<float>& logits) {
  submit(Job::kHead, batch, rows, logits, nullptr);
}

void RankSet::submit(Job job, std::span<const model::BatchToken> batch, const float* in,
                     std::vector<float>& out, model::TapSink* taps) {
  std::unique_lock lock(mu_);
  if (error_) std::rethrow_exception(error_);
  batch_ = batch;
  hidden_in_ = in;
  logits_ = &out;
  taps_ = taps;
  job_ = job;
  dispatchLocked(lock);
}

std::vector<uint8_t> RankSet::gatherTensor(const model::TensorShard& shard, bool assemble) {
  std::vector<uint8_t> out;
  std::unique_lock lock(mu_);
  if (error_) std::rethrow_exception(error_);
  if (shard.kind == model::ShardKind::kReplicate) {  // passes through: local rank 0's copy
    if (assemble) out = model::shardBytes(ranks_.front()->model->weights(), shard);
    return out;
  }
  read_ = &shard;
  job_ = Job::kRead;
  read_out_ = assemble ? &out : nullptr;
  dispatchLocked(lock);
  return out;
}

std::vector<bool> RankSet::runKvTier(std::span<const KvTierBlock> stores,
                                     std::span<const KvTierBlock> loads) {
  std::vector<float> sums;
  std::unique_lock lock(mu_);
  if (error_) std::rethrow_exception(error_);
  tier_stores_ = stores;
  tier_loads_ = loads;
  logits_ = &sums;
  job_ = Job::kTier;
  dispatchLocked(lock);
  tier_stores_ = {};
  tier_loads_ = {};
  // Every rank of the group added 1 for each block it imported.
  const float world = static_cast<float>(group_->topology().worldSize());
  std::vector<bool> loaded(loads.size(), false);
  for (size_t i = 0; i < loads.size() && i < sums.size(); ++i) loaded[i] = sums[i] == world;
  return loaded;
}

void RankSet::rankTier(Rank& rank, std::vector<float>* out) {
  model::KvBlockIo* cache = rank.model->pagedKvCache();
  std::vector<float> flags(tier_loads_.size(), 0.0f);
  if (rank.tier && cache != nullptr) {
    rank.tier->store(*cache, tier_stores_);
    if (!tier_loads_.empty()) flags = rank.tier->load(*cache, tier_loads_);
  }
  // Small integers add up exactly in f32.
  if (!flags.empty()) rank.comm->allReduceSum(flags.data(), flags.size(), collectives::DType::kF32);
  if (out != nullptr) *out = std::move(flags);
}

std::vector<uint64_t> RankSet::expertLoadByRank() const {
  if (experts_of_rank_.empty()) return {};
  const std::vector<uint64_t> pairs = ranks_.front()->model->expertPairs();
  std::vector<uint64_t> out;
  for (const auto& [begin, end] : experts_of_rank_) {
    uint64_t n = 0;
    for (uint64_t e = begin; e < end && e < pairs.size(); ++e) n += pairs[e];
    out.push_back(n);
  }
  return out;
}

std::string RankSet::readRefusal(const model::TensorShard& shard) const {
  return model::readRefusal(ranks_.front()->model->weights(), shard);
}

void RankSet::dispatchLocked(std::unique_lock<std::mutex>& lock) {
  pending_ = static_cast<int>(ranks_.size());
  ++generation_;
  work_cv_.notify_all();
  done_cv_.wait(lock, [&] { return pending_ == 0; });
  read_ = nullptr;
  taps_ = nullptr;
  hidden_in_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

void RankSet::runJob(Rank& rank, Job job, std::span<const model::BatchToken> batch,
                     const float* hidden_in, std::vector<float>* out, model::TapSink* taps) {
  switch (job) {
    case Job::kForward:
      rank.model->forward(batch, *out, taps);
      return;
    case Job::kLayers:
      rank.model->forwardLayers(batch, hidden_in, *out, taps);
      return;
    case Job::kHead:
      rank.model->forwardHead(batch, hidden_in, *out);
      return;
    case Job::kRead:
    case Job::kTier:
      return;  // rankLoop runs them
  }
}

void RankSet::rankRead(Rank& rank, const model::TensorShard& shard, std::vector<uint8_t>* out) {
  std::vector<uint8_t> mine = model::shardBytes(rank.model->weights(), shard);
  const collectives::Topology& topo = group_->topology();
  const size_t tp = static_cast<size_t>(topo.worldSize());
  // Every rank gathers the largest slice's size (whole experts per rank may differ by one).
  uint64_t largest = 0;
  for (size_t r = 0; r < tp; ++r) {
    largest = std::max(largest, shard.bytesFor(static_cast<int>(r), static_cast<int>(tp)));
  }
  const size_t stride = (largest + 1) & ~size_t{1};  // gathered as 16-bit units
  mine.resize(stride);
  const bool root = topo.globalRank(rank.local_rank) == 0;  // node 0's local rank 0 keeps it
  std::vector<uint8_t> all(root ? stride * tp : 0), part;
  // In chunks of the slice (every rank has the same stride, so the same number of calls).
  for (size_t off = 0; off < stride; off += read_chunk_) {
    const size_t n = std::min(read_chunk_, stride - off);
    part.resize(n * tp);  // gather() may use it as scratch on every rank
    rank.comm->gather(mine.data() + off, part.data(), n / 2, collectives::DType::kF16, 0);
    if (!root) continue;
    for (size_t r = 0; r < tp; ++r) {
      std::memcpy(all.data() + r * stride + off, part.data() + r * n, n);
    }
  }
  if (out != nullptr && root) {
    *out = model::assembleTensor(shard, static_cast<int>(tp), all.data(), stride);
  }
}

void RankSet::rankLoop(Rank& rank) {
  if (static_cast<size_t>(rank.local_rank) < cpu_of_rank_.size()) {
    pinThisThread(cpu_of_rank_[static_cast<size_t>(rank.local_rank)]);
  }
  uint64_t seen = 0;
  for (;;) {
    std::span<const model::BatchToken> batch;
    std::vector<float>* out = nullptr;
    model::TapSink* taps = nullptr;
    const model::TensorShard* read = nullptr;
    std::vector<uint8_t>* read_out = nullptr;
    Job job = Job::kForward;
    const float* hidden_in = nullptr;
    {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      batch = batch_;
      // The node's leader (local rank 0) returns the node's results.
      const bool leader = collectives::Topology::isLeader(rank.local_rank);
      out = leader ? logits_ : &rank.scratch_logits;
      taps = leader ? taps_ : nullptr;
      read = read_;
      read_out = leader ? read_out_ : nullptr;
      job = job_;
      hidden_in = hidden_in_;
    }
    std::exception_ptr failure;
    try {
      if (job == Job::kRead) {
        rankRead(rank, *read, read_out);
      } else if (job == Job::kTier) {
        rankTier(rank, out);
      } else {
        runJob(rank, job, batch, hidden_in, out, taps);
      }
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
