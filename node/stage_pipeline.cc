#include "node/stage_pipeline.h"

#include <algorithm>
#include <cstring>

#include "common/check.h"
#include "common/error.h"

namespace tpnode::node {

StagePipeline::StagePipeline(mesh::Mesh& mesh, const collectives::Topology& topology,
                             RankSet& ranks, int64_t n_embd)
    : mesh_(mesh), topology_(topology), ranks_(ranks), n_embd_(static_cast<uint32_t>(n_embd)) {
  TP_CHECK(topology_.stages() > 1, "a pipeline of {} stage(s)", topology_.stages());
}

int StagePipeline::peerIn(int stage) const {
  // Node j of a stage talks to node j of the others: every node of a stage holds the same
  // hidden state (it is all-reduced inside the stage), so each passes it on in parallel.
  const int j = topology_.nodeId() - topology_.firstNodeOf(topology_.stage());
  return topology_.firstNodeOf(stage) + j;
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

namespace {

// Micro-batch i of `micros`: a contiguous run of the batch's tokens.
std::span<const model::BatchToken> part(std::span<const model::BatchToken> batch, uint32_t i,
                                        uint32_t micros) {
  const size_t begin = batch.size() * i / micros, end = batch.size() * (i + 1) / micros;
  return batch.subspan(begin, end - begin);
}

uint32_t outputs(std::span<const model::BatchToken> b) {
  return static_cast<uint32_t>(
      std::count_if(b.begin(), b.end(), [](const model::BatchToken& t) { return t.logits; }));
}

}  // namespace

void StagePipeline::run(std::span<const model::BatchToken> batch, std::vector<float>& logits) {
  logits.clear();
  if (topology_.stage() == 0) {
    TP_CHECK(flight_.empty(), "run() on stage 0 with {} step(s) in flight", flight_.size());
    begin(batch);
    finish(logits);
    return;
  }
  ++step_;
  try {
    runForward(batch);
  } catch (const Error&) {
    sendAbort(step_);
    throw;
  }
}

void StagePipeline::begin(std::span<const model::BatchToken> batch) {
  TP_CHECK(topology_.stage() == 0, "begin() on stage {}", topology_.stage());
  ++step_;
  if (!flight_.empty()) ++overlapped_;
  try {
    runForward(batch);
  } catch (const Error&) {
    sendAbort(step_);
    throw;
  }
  // finish() runs only the head, which reads no KV cache: the kept copy drops the block tables,
  // which point into the caller's step command (a worker's lives only until this returns).
  InFlight f{step_, std::vector<model::BatchToken>(batch.begin(), batch.end())};
  for (model::BatchToken& t : f.batch) t.blocks = {};
  flight_.push_back(std::move(f));
}

void StagePipeline::finish(std::vector<float>& logits) {
  TP_CHECK(topology_.stage() == 0 && !flight_.empty(), "finish() on stage {} with {} in flight",
           topology_.stage(), flight_.size());
  logits.clear();
  try {
    finishOldest(logits);
  } catch (const Error&) {
    sendAbort(step_);
    throw;
  }
}

void StagePipeline::sendAbort(uint64_t step) noexcept {
  const int stage = topology_.stage();
  const bool last = stage == topology_.stages() - 1;
  if (stage == 0 && last) return;
  const int to = peerIn(last ? 0 : stage + 1);
  try {
    if (!mesh_.peerAlive(to)) return;
    HiddenHeader h{HiddenKind::kAbort, step, 0, 1, 0, 0};
    send(to, last ? kTagPipelineReturn : kTagPipelineForward, h, nullptr);
  } catch (const Error&) {
    // The downstream node is gone as well: nothing waits for this message.
  }
}

uint32_t StagePipeline::microBatches(size_t tokens) const {
  const size_t m = tokens / kMinMicroBatchTokens;
  return static_cast<uint32_t>(std::clamp<size_t>(m, 1, static_cast<size_t>(topology_.stages())));
}

void StagePipeline::runForward(std::span<const model::BatchToken> batch) {
  const int stage = topology_.stage();
  const int last = topology_.stages() - 1;
  const uint32_t micros = microBatches(batch.size());
  // Each micro-batch goes on as soon as this stage has run it, so that the next stage works on
  // it while this one runs the next.
  for (uint32_t i = 0; i < micros; ++i) {
    const auto mb = part(batch, i, micros);
    const HiddenHeader fwd{
        HiddenKind::kForward, step_, i, micros, static_cast<uint32_t>(mb.size()), n_embd_};
    const float* in = nullptr;
    if (stage > 0) {
      recv(peerIn(stage - 1), kTagPipelineForward, fwd, hidden_in_);
      in = hidden_in_.data();
    }
    ranks_.runLayers(mb, in, hidden_out_);
    if (stage < last) {
      send(peerIn(stage + 1), kTagPipelineForward, fwd, hidden_out_.data());
      continue;
    }
    // The last stage: the final rows of the tokens that need logits, in batch order.
    rows_.resize(size_t{outputs(mb)} * n_embd_);
    size_t j = 0;
    for (size_t t = 0; t < mb.size(); ++t) {
      if (!mb[t].logits) continue;
      std::memcpy(rows_.data() + j * n_embd_, hidden_out_.data() + t * n_embd_,
                  n_embd_ * sizeof(float));
      ++j;
    }
    const HiddenHeader ret{HiddenKind::kReturn, step_, i, micros, outputs(mb), n_embd_};
    send(peerIn(0), kTagPipelineReturn, ret, rows_.data());
  }
}

void StagePipeline::finishOldest(std::vector<float>& logits) {
  const InFlight f = std::move(flight_.front());
  flight_.pop_front();
  const std::span<const model::BatchToken> batch(f.batch);
  const uint32_t micros = microBatches(batch.size());
  rows_.clear();
  for (uint32_t i = 0; i < micros; ++i) {
    const HiddenHeader ret{
        HiddenKind::kReturn, f.step, i, micros, outputs(part(batch, i, micros)), n_embd_};
    recv(peerIn(topology_.stages() - 1), kTagPipelineReturn, ret, hidden_in_);
    rows_.insert(rows_.end(), hidden_in_.begin(), hidden_in_.end());
  }
  if (!rows_.empty()) ranks_.runHead(batch, rows_.data(), logits);
}

}  // namespace tpnode::node
