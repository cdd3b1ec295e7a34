#include "node/stage_pipeline.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"

namespace tpnode::node {

StagePipeline::StagePipeline(mesh::Mesh& mesh, const collectives::Topology& topology,
                             RankSet& ranks, int64_t n_embd)
    : mesh_(mesh), topology_(topology), ranks_(ranks), n_embd_(static_cast<uint32_t>(n_embd)) {
  if (topology_.nodesPerStage() != 1) {
    fail(ErrorCode::kUnsupported, "pipeline stages of {} nodes are not supported yet",
         topology_.nodesPerStage());
  }
}

void StagePipeline::send(int node, uint32_t tag, const HiddenHeader& h, const float* rows) {
  encodeHidden(h, rows, bytes_);
  mesh_.send(node, tag, bytes_);
}

void StagePipeline::recv(int node, uint32_t tag, const HiddenHeader& h, std::vector<float>& out) {
  // Exactly the expected size: a longer message is refused by the mesh, a shorter one here.
  bytes_.resize(hiddenMessageBytes(h.rows, h.cols));
  const size_t n = mesh_.recv(node, tag, bytes_);
  decodeHidden(std::span(bytes_.data(), n), h, out);
}

void StagePipeline::run(std::span<const model::BatchToken> batch, std::vector<float>& logits) {
  ++step_;
  logits.clear();
  try {
    runStage(batch, logits);
  } catch (const Error&) {
    sendAbort();
    throw;
  }
}

void StagePipeline::sendAbort() noexcept {
  const int stage = topology_.stage();
  const bool last = stage == topology_.stages() - 1;
  if (stage == 0 && last) return;
  const int to = topology_.firstNodeOf(last ? 0 : stage + 1);
  try {
    if (!mesh_.peerAlive(to)) return;
    HiddenHeader h{HiddenKind::kAbort, step_, 0, 1, 0, 0};
    send(to, last ? kTagPipelineReturn : kTagPipelineForward, h, nullptr);
  } catch (const Error&) {
    // The downstream node is gone as well: nothing waits for this message.
  }
}

void StagePipeline::runStage(std::span<const model::BatchToken> batch, std::vector<float>& logits) {
  const int stage = topology_.stage();
  const int last = topology_.stages() - 1;
  const uint32_t n = static_cast<uint32_t>(batch.size());
  const uint32_t n_out = static_cast<uint32_t>(std::count_if(
      batch.begin(), batch.end(), [](const model::BatchToken& t) { return t.logits; }));
  HiddenHeader fwd{HiddenKind::kForward, step_, 0, 1, n, n_embd_};
  HiddenHeader ret{HiddenKind::kReturn, step_, 0, 1, n_out, n_embd_};

  const float* in = nullptr;
  if (stage > 0) {
    recv(topology_.firstNodeOf(stage - 1), kTagPipelineForward, fwd, hidden_in_);
    in = hidden_in_.data();
  }
  ranks_.runLayers(batch, in, hidden_out_);
  if (stage < last) {
    send(topology_.firstNodeOf(stage + 1), kTagPipelineForward, fwd, hidden_out_.data());
  } else {
    // The final rows of the tokens that need logits, in batch order.
    rows_.resize(size_t{n_out} * n_embd_);
    size_t j = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!batch[i].logits) continue;
      std::memcpy(rows_.data() + j * n_embd_, hidden_out_.data() + i * n_embd_,
                  n_embd_ * sizeof(float));
      ++j;
    }
    if (stage != 0) send(topology_.firstNodeOf(0), kTagPipelineReturn, ret, rows_.data());
  }
  if (stage != 0) return;
  if (last != 0) recv(topology_.firstNodeOf(last), kTagPipelineReturn, ret, rows_);
  if (n_out > 0) ranks_.runHead(batch, rows_.data(), logits);
}

}  // namespace tpnode::node
