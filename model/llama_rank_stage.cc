// A rank's part of a pipeline step (RankModel::forwardLayers / forwardHead): LlamaRank runs
// its stage's layers on the previous stage's hidden state, and stage 0 runs the output head on
// the final rows the last stage returns. Ranks that cannot run a stage refuse.
#include <algorithm>
#include <cstring>

#include "common/check.h"
#include "common/error.h"
#include "model/kernels/cpu/matmul.h"
#include "model/llama_rank.h"

namespace tpnode::model {

void RankModel::forwardLayers(std::span<const BatchToken>, const float*, std::vector<float>&,
                              TapSink*) {
  fail(ErrorCode::kUnsupported, "{} ranks cannot run a pipeline stage yet (use CPU ranks)",
       backend());
}

void RankModel::forwardHead(std::span<const BatchToken>, const float*, std::vector<float>&) {
  fail(ErrorCode::kUnsupported, "{} ranks cannot run a pipeline stage yet (use CPU ranks)",
       backend());
}

void LlamaRank::forwardLayers(std::span<const BatchToken> batch, const float* hidden_in,
                              std::vector<float>& hidden_out, TapSink* taps) {
  const int64_t n = static_cast<int64_t>(batch.size());
  const int64_t dim = config_.n_embd;
  checkBatch(batch, config_.n_vocab, kv_.slots(), kv_.ctx());
  checkKvTables(batch);
  x_.resize(static_cast<size_t>(n * dim));
  if (hidden_in != nullptr) {
    std::copy_n(hidden_in, x_.size(), x_.data());
  } else {
    TP_CHECK(weights_.embeddings, "the first stage's ranks hold the token embeddings");
    embed(batch);
  }
  TP_CHECK(taps == nullptr || taps->rows.size() == taps->specs.size(),
           "a tap sink of {} specs holds {} row sets", taps->specs.size(), taps->rows.size());
  for (int64_t l = weights_.layer_begin; l < weights_.layer_end; ++l) {
    attentionBlock(l, batch);
    tap(taps, l, TapPoint::kAttnOut, o_, batch);  // as forward()
    ffnBlock(l, n);
    tap(taps, l, TapPoint::kMlpOut, o_, batch);
    tap(taps, l, TapPoint::kResidual, x_, batch);
  }
  hidden_out.assign(x_.begin(), x_.end());
}

void LlamaRank::forwardHead(std::span<const BatchToken> batch, const float* rows,
                            std::vector<float>& logits) {
  TP_CHECK(weights_.embeddings, "the first stage's ranks hold the output head");
  const int64_t dim = config_.n_embd;
  // head() reads the rows of the tokens marked `logits` at their batch positions.
  x_.resize(batch.size() * static_cast<size_t>(dim));
  int64_t j = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!batch[i].logits) continue;
    std::memcpy(x_.data() + static_cast<int64_t>(i) * dim, rows + j * dim,
                static_cast<size_t>(dim) * sizeof(float));
    ++j;
  }
  head(batch, logits);
  softcap(logits);
}

}  // namespace tpnode::model
