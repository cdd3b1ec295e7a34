#include "node/stage_pipeline.h"

#include <algorithm>
#include <cstring>

#include "common/check.h"
#include "common/error.h"

namespace tpnode::node {

StagePipeline::StagePipeline(mesh::Mesh& mesh, const collectives::Topology& topology,
                             RankSet& ranks, int64_t n_embd, std::vector<model::LayerRange> layers)
    : mesh_(mesh),
      topology_(topology),
      ranks_(ranks),
      n_embd_(static_cast<uint32_t>(n_embd)),
      layers_(std::move(layers)),
      moe_(!ranks.expertLoadByRank().empty()),
      stage_ranks_(static_cast<uint32_t>(ranks.expertLoadByRank().size())),
      stage_load_(static_cast<size_t>(topology.stages()),
                  std::vector<uint64_t>(ranks.expertLoadByRank().size(), 0)) {
  TP_CHECK(topology_.stages() > 1, "a pipeline of {} stage(s)", topology_.stages());
  TP_CHECK(layers_.size() == static_cast<size_t>(topology_.stages()), "{} layer ranges, {} stages",
           layers_.size(), topology_.stages());
}

std::vector<uint64_t> StagePipeline::expertLoad() const {
  if (!moe_) return {};
  std::vector<uint64_t> out = ranks_.expertLoadByRank();
  for (size_t s = 1; s < stage_load_.size(); ++s) {
    out.insert(out.end(), stage_load_[s].begin(), stage_load_[s].end());
  }
  return out;
}

std::vector<model::TapSpec> StagePipeline::tapsOf(int stage,
                                                  std::span<const model::TapSpec> taps) const {
  std::vector<model::TapSpec> out;
  for (const model::TapSpec& t : taps) {
    if (layers_[static_cast<size_t>(stage)].contains(t.layer)) out.push_back(t);
  }
  return out;
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

uint32_t tapped(std::span<const model::BatchToken> b) {
  return static_cast<uint32_t>(
      std::count_if(b.begin(), b.end(), [](const model::BatchToken& t) { return t.tap; }));
}

}  // namespace

void StagePipeline::run(std::span<const model::BatchToken> batch, std::vector<float>& logits,
                        std::span<const model::TapSpec> taps, model::TapSink* out) {
  logits.clear();
  if (topology_.stage() == 0) {
    TP_CHECK(flight_.empty(), "run() on stage 0 with {} step(s) in flight", flight_.size());
    begin(batch, taps);
    finish(logits, out);
    return;
  }
  ++step_;
  model::TapSink sink;
  try {
    runForward(batch, taps, sink);
  } catch (const Error&) {
    sendAbort(step_);
    throw;
  }
}

void StagePipeline::begin(std::span<const model::BatchToken> batch,
                          std::span<const model::TapSpec> taps) {
  TP_CHECK(topology_.stage() == 0, "begin() on stage {}", topology_.stage());
  ++step_;
  if (!flight_.empty()) ++overlapped_;
  // finish() runs only the head, which reads no KV cache: the kept copy drops the block tables,
  // which point into the caller's step command (a worker's lives only until this returns).
  InFlight f{step_,
             std::vector<model::BatchToken>(batch.begin(), batch.end()),
             std::vector<model::TapSpec>(taps.begin(), taps.end()),
             {}};
  try {
    runForward(batch, taps, f.stage_taps);
  } catch (const Error&) {
    sendAbort(step_);
    throw;
  }
  for (model::BatchToken& t : f.batch) t.blocks = {};
  flight_.push_back(std::move(f));
}

void StagePipeline::finish(std::vector<float>& logits, model::TapSink* out) {
  TP_CHECK(topology_.stage() == 0 && !flight_.empty(), "finish() on stage {} with {} in flight",
           topology_.stage(), flight_.size());
  TP_CHECK(out == nullptr || topology_.nodeId() == 0, "taps are gathered on node 0");
  logits.clear();
  InFlight f = std::move(flight_.front());
  flight_.pop_front();
  try {
    finishOldest(f, logits, out);
  } catch (const Error&) {
    sendAbort(step_);
    throw;
  }
}

std::vector<bool> StagePipeline::runKvTier(std::span<const KvTierBlock> stores,
                                           std::span<const KvTierBlock> loads) {
  const uint64_t round = ++tier_round_;
  const int stage = topology_.stage();
  const bool reports =
      stage > 0 && !loads.empty() && topology_.nodeId() == topology_.firstNodeOf(stage);
  std::vector<bool> loaded;
  try {
    loaded = ranks_.runKvTier(stores, loads);  // this stage's ranks agree
  } catch (const Error&) {
    // Node 0 waits for this stage's flags: an abort fails the round there at once.
    try {
      if (reports && mesh_.peerAlive(0)) {
        send(0, kTagPipelineTier, HiddenHeader{HiddenKind::kAbort, round, 0, 1, 0, 0}, nullptr);
      }
    } catch (const Error&) {
      // Node 0 is gone as well: nothing waits for this message.
    }
    throw;
  }
  if (reports) {
    encodeTierLoads(round, loaded, bytes_);
    mesh_.send(0, kTagPipelineTier, bytes_);
  }
  if (topology_.nodeId() != 0 || loads.empty()) return loaded;
  const uint32_t n = static_cast<uint32_t>(loads.size());
  for (int s = 1; s < topology_.stages(); ++s) {
    // Exactly the expected size: a longer message is refused by the mesh, a shorter one here.
    bytes_.resize(hiddenMessageBytes(n, 1));
    const size_t got = mesh_.recv(topology_.firstNodeOf(s), kTagPipelineTier, bytes_);
    const std::vector<bool> theirs = decodeTierLoads(std::span(bytes_.data(), got), round, n);
    for (size_t i = 0; i < loaded.size(); ++i) loaded[i] = loaded[i] && theirs[i];
  }
  return loaded;
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

void StagePipeline::runForward(std::span<const model::BatchToken> batch,
                               std::span<const model::TapSpec> taps, model::TapSink& sink) {
  const int stage = topology_.stage();
  const int last = topology_.stages() - 1;
  const uint32_t micros = microBatches(batch.size());
  // The first node of the stage takes its layers' taps (every node of it holds the same rows).
  const bool taking = topology_.nodeId() == topology_.firstNodeOf(stage);
  sink.specs = taking ? tapsOf(stage, taps) : std::vector<model::TapSpec>{};
  sink.rows.assign(sink.specs.size(), {});
  model::TapSink* into = sink.specs.empty() ? nullptr : &sink;
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
    ranks_.runLayers(mb, in, hidden_out_, into);
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
  if (stage == 0 || !taking) return;
  // A later stage's report goes to node 0 once the step has gone on: its taps, spec after
  // spec, then its expert load.
  if (into != nullptr) {
    const uint32_t n = tapped(batch);
    rows_.clear();
    for (const std::vector<float>& r : sink.rows) {
      TP_CHECK(r.size() == size_t{n} * n_embd_, "a tap of {} floats, {} tokens", r.size(), n);
      rows_.insert(rows_.end(), r.begin(), r.end());
    }
    const HiddenHeader h{
        HiddenKind::kTaps, step_, 0, 1, static_cast<uint32_t>(sink.specs.size()) * n, n_embd_};
    send(0, kTagPipelineReport, h, rows_.data());
  }
  if (moe_) {
    encodeExpertLoad(step_, ranks_.expertLoadByRank(), bytes_);
    mesh_.send(0, kTagPipelineReport, bytes_);
  }
}

void StagePipeline::finishOldest(InFlight& f, std::vector<float>& logits, model::TapSink* out) {
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
  if (topology_.nodeId() != 0) return;
  // The later stages' reports. Every tap of the step, in its order: stage 0's from begin(),
  // the others' from their stage.
  if (out != nullptr) {
    out->specs = f.taps;
    out->rows.assign(f.taps.size(), {});
  }
  auto place = [&](const model::TapSpec& spec, const float* rows, size_t floats) {
    if (out == nullptr) return;
    const size_t at =
        static_cast<size_t>(std::find(f.taps.begin(), f.taps.end(), spec) - f.taps.begin());
    out->rows[at].assign(rows, rows + floats);
  };
  for (size_t k = 0; k < f.stage_taps.specs.size(); ++k) {
    place(f.stage_taps.specs[k], f.stage_taps.rows[k].data(), f.stage_taps.rows[k].size());
  }
  const uint32_t n = tapped(batch);
  for (int s = 1; s < topology_.stages(); ++s) {
    const int from = topology_.firstNodeOf(s);
    const std::vector<model::TapSpec> specs = tapsOf(s, f.taps);
    if (!specs.empty()) {
      const HiddenHeader h{
          HiddenKind::kTaps, f.step, 0, 1, static_cast<uint32_t>(specs.size()) * n, n_embd_};
      recv(from, kTagPipelineReport, h, hidden_in_);
      const size_t each = size_t{n} * n_embd_;
      for (size_t k = 0; k < specs.size(); ++k) {
        place(specs[k], hidden_in_.data() + k * each, each);
      }
    }
    if (moe_) {
      bytes_.resize(hiddenMessageBytes(stage_ranks_, 2));
      const size_t got = mesh_.recv(from, kTagPipelineReport, bytes_);
      stage_load_[static_cast<size_t>(s)] =
          decodeExpertLoad(std::span(bytes_.data(), got), f.step, stage_ranks_);
    }
  }
}

}  // namespace tpnode::node
