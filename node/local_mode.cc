// One-process mode: --tp local CPU ranks as threads (collectives::LocalGroup), one prompt,
// sampling (model/sampling, greedy at --temp 0) on rank 0, generation and tokens/s printed (or one
// JSON object), optional logits dump in the ../shared/reference layout.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "collectives/local_group.h"
#include "common/error.h"
#include "common/log.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/local_engine.h"
#include "model/npy.h"
#include "model/sampling.h"
#include "model/shard_plan.h"
#include "node/modes.h"
#include "node/text_codec.h"

namespace tpnode::node {
namespace {

std::vector<int32_t> parseIds(const std::string& s) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    std::string item = s.substr(i, j - i);
    try {
      size_t used = 0;
      long v = std::stol(item, &used);
      if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(item);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      fail(ErrorCode::kInvalidArgument, "--prompt-ids: '{}' is not a token id", item);
    }
    i = j + 1;
  }
  return ids;
}

std::vector<int32_t> promptIds(const Options& o, const TextCodec* codec) {
  if (!o.prompt_ids.empty()) return parseIds(o.prompt_ids);
  if (o.prompt.empty()) fail(ErrorCode::kInvalidArgument, "give --prompt or --prompt-ids");
  if (!codec) {
    fail(ErrorCode::kUnsupported,
         "--prompt text needs the tokenizer, which is not connected in this build yet; pass "
         "token ids with --prompt-ids 1,2,3");
  }
  return codec->encode(o.prompt);
}

// Weight bytes one decode step reads over all ranks: every tensor once, token_embd one row
// (unless it is also the head).
uint64_t decodeWeightBytes(const model::ShardPlan& plan, const model::GgufMetadata& meta) {
  uint64_t total = 0;
  for (int r = 0; r < plan.tp; ++r) total += plan.rankBytes(r);
  const model::GgufTensorInfo* embd = meta.findTensor("token_embd.weight");
  if (embd && meta.findTensor("output.weight")) {
    total -= embd->n_bytes * static_cast<uint64_t>(plan.tp);
    total += embd->n_bytes / embd->rows();
  }
  return total;
}

double rate(int64_t n, double seconds) {
  return seconds > 0 ? double(n) / seconds : 0.0;
}

}  // namespace

int runLocal(const Options& o) {
  if (o.tp < 1) fail(ErrorCode::kInvalidArgument, "--tp {} must be at least 1", o.tp);
  if (o.threads < 1)
    fail(ErrorCode::kInvalidArgument, "--threads {} must be at least 1", o.threads);
  if (o.n_predict < 0) fail(ErrorCode::kInvalidArgument, "-n {} must be >= 0", o.n_predict);
  auto t0 = std::chrono::steady_clock::now();
  auto file = model::GgufFile::open(o.model);
  model::ModelConfig config = model::readModelConfig(file->metadata());
  spdlog::info("[model] {}", config.summary());
  model::ShardPlan plan = model::planShards(config, model::tensorDescs(file->metadata()), o.tp);
  spdlog::info("[model] {}", plan.describe());
  std::unique_ptr<TextCodec> codec = makeTextCodec(file->metadata());
  std::vector<int32_t> prompt = promptIds(o, codec.get());
  if (prompt.empty()) fail(ErrorCode::kInvalidArgument, "the prompt has no tokens");
  const int64_t needed = static_cast<int64_t>(prompt.size()) + o.n_predict;
  if (needed > o.ctx_size) {
    fail(ErrorCode::kInvalidArgument, "prompt ({}) + -n ({}) exceeds --ctx-size {}", prompt.size(),
         o.n_predict, o.ctx_size);
  }

  auto group = collectives::LocalGroup::create(o.tp);
  std::vector<std::unique_ptr<collectives::Communicator>> owned;
  std::vector<collectives::Communicator*> comms;
  for (int r = 0; r < o.tp; ++r) {
    owned.push_back(group->communicator(r));
    comms.push_back(owned.back().get());
  }
  model::LocalEngine engine(*file, config, plan, comms, {o.threads, needed});
  double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("[model] loaded {} ranks in {:.2f} s", o.tp, load_s);

  model::GenerationRequest req;
  req.prompt = prompt;
  req.n_predict = o.n_predict;
  req.all_logits = !o.dump_logits.empty();
  // Sampling on rank 0 (the engine calls the picker there only).
  model::SamplingParams sp;
  sp.temperature = static_cast<float>(o.temperature);
  sp.top_k = o.top_k;
  sp.top_p = static_cast<float>(o.top_p);
  sp.min_p = static_cast<float>(o.min_p);
  sp.repeat_penalty = static_cast<float>(o.repeat_penalty);
  sp.seed = o.seed;
  model::Sampler sampler(sp, static_cast<int32_t>(config.n_vocab));
  sampler.acceptPrompt(prompt);
  model::TokenPicker picker = [&sampler](const float* logits, int64_t n_vocab) {
    return sampler.sample(std::span<const float>(logits, static_cast<size_t>(n_vocab)));
  };
  model::GenerationResult res = engine.generate(req, picker);
  if (!o.dump_logits.empty()) {
    model::writeNpy(o.dump_logits, res.logits.data(), res.logit_rows, config.n_vocab);
  }
  const double prefill_tps = rate(static_cast<int64_t>(prompt.size()), res.prefill_seconds);
  const double decode_tps = rate(res.decode_steps, res.decode_seconds);
  std::string text = codec ? codec->decode(res.ids) : std::string();
  if (o.json) {
    nlohmann::json j;
    j["prompt_ids"] = prompt;
    j["ids"] = res.ids;
    j["text"] = text;
    j["prefill_tps"] = prefill_tps;
    j["decode_tps"] = decode_tps;
    j["decode_weight_bytes"] = decodeWeightBytes(plan, file->metadata());
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    if (codec) {
      std::printf("%s\n", text.c_str());
    } else {
      std::string ids;
      for (int32_t id : res.ids) ids += (ids.empty() ? "" : ",") + std::to_string(id);
      std::printf("ids: %s\n", ids.c_str());
    }
    std::fprintf(stderr,
                 "prefill: %zu tokens in %.3f s (%.1f tokens/s); decode: %lld tokens in %.3f s "
                 "(%.1f tokens/s); tp=%d threads/rank=%d\n",
                 prompt.size(), res.prefill_seconds, prefill_tps,
                 static_cast<long long>(res.decode_steps), res.decode_seconds, decode_tps, o.tp,
                 o.threads);
  }
  return 0;
}

}  // namespace tpnode::node
