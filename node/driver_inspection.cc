// Driver, the inspection part: activation taps (marked in the batch, collected after the step)
// and tensor reads (served between steps). See node/driver.h and docs/inspection.md.
#include <algorithm>
#include <optional>

#include "common/error.h"
#include "model/tensor_read.h"
#include "node/driver.h"
#include "node/mesh_setup.h"
#include "node/stage_tensor_read.h"
#include "node/step_batch.h"
#include "node/step_command.h"

namespace tpnode::node {

using Clock = std::chrono::steady_clock;

// ---- Taps (loop thread) -------------------------------------------------------------------

void Driver::markTaps(PlannedStep& step) {
  std::vector<model::TapSpec>& specs = step.command.taps;
  specs.clear();
  for (size_t i = 0; i < step.command.seqs.size(); ++i) {
    SeqChunk& c = step.command.seqs[i];
    const ActiveRequest& a = requests_->at(step.participants[i]->id);
    const size_t n_prompt = a.request.prompt_ids.size();
    c.n_tap = 0;
    if (!a.state_taps || c.start_pos >= n_prompt) continue;
    c.n_tap = static_cast<uint32_t>(std::min(c.tokens.size(), n_prompt - c.start_pos));
    for (const TapResult& t : a.taps) {
      if (t.spec.point == model::TapPoint::kLogits) continue;
      if (std::find(specs.begin(), specs.end(), t.spec) == specs.end()) specs.push_back(t.spec);
    }
  }
}

void Driver::collectTaps(const PlannedStep& step, const model::TapSink& sink,
                         std::span<const model::BatchToken> batch) {
  const int64_t dim = model_.config.n_embd, vocab = model_.config.n_vocab;
  size_t at = 0, tapped = 0, row = 0;
  for (size_t i = 0; i < step.command.seqs.size(); ++i) {
    const SeqChunk& c = step.command.seqs[i];
    ActiveRequest& a = requests_->at(step.participants[i]->id);
    const size_t n_prompt = a.request.prompt_ids.size();
    const size_t rows = logitRows(c);
    for (size_t j = 0; j < c.tokens.size(); ++j) {
      const bool in_prompt = c.start_pos + j < n_prompt;
      for (TapResult& t : a.taps) {
        const float* src = nullptr;
        int64_t width = dim;
        if (t.spec.point == model::TapPoint::kLogits) {
          if (!in_prompt || !(c.flags & kLogitsAll)) continue;
          src = logits_.data() + (row + j) * static_cast<size_t>(vocab);
          width = vocab;
        } else if (batch[at + j].tap) {
          size_t s = static_cast<size_t>(std::find(sink.specs.begin(), sink.specs.end(), t.spec) -
                                         sink.specs.begin());
          src = sink.rows[s].data() + tapped * static_cast<size_t>(dim);
        } else {
          continue;
        }
        t.data.insert(t.data.end(), src, src + width);
        ++t.rows;
      }
      if (batch[at + j].tap) ++tapped;
    }
    at += c.tokens.size();
    row += rows;
  }
}

// ---- Tensor reads ---------------------------------------------------------------------------

TensorListing Driver::listing(size_t index) const {
  const model::TensorShard& s = model_.plan.shards[index];
  const model::GgufTensorInfo& info = model_.file->metadata().tensors[index];
  TensorListing l;
  l.name = s.tensor.name;
  l.type = std::string(model::tensorTypeName(s.tensor.type));
  l.type_id = s.tensor.type;
  l.ne.assign(info.ne, info.ne + std::max<uint32_t>(1, std::min<uint32_t>(info.n_dims, 4)));
  l.shape = model::numpyShape(info);
  l.pieces = s.pieces;
  l.ranks = model_.plan.tp;
  l.bytes = s.bytesFor(0, 1);
  switch (s.kind) {
    case model::ShardKind::kReplicate:
      l.sharding = "replicate";
      break;
    case model::ShardKind::kSplitRows:  // a bias (1-D) splits its only axis
      l.sharding = "split_rows";        // stacked experts [E, rows, cols]: the rows of each
      l.numpy_axis = s.tensor.rows == 1     ? static_cast<int>(l.shape.size()) - 1
                     : s.tensor.experts > 1 ? 1
                                            : 0;
      break;
    case model::ShardKind::kSplitCols:
      l.sharding = "split_cols";
      l.numpy_axis = static_cast<int>(l.shape.size()) - 1;
      break;
    case model::ShardKind::kSplitExperts:  // whole experts per rank
      l.sharding = "split_experts";
      l.numpy_axis = 0;
      break;
  }
  return l;
}

std::vector<TensorListing> Driver::listTensors() const {
  std::vector<TensorListing> out;
  for (size_t i = 0; i < model_.plan.shards.size(); ++i) out.push_back(listing(i));
  return out;
}

void Driver::readTensor(const std::string& name, std::function<void(TensorReadResult)> done) {
  size_t index = model_.plan.shards.size();
  for (size_t i = 0; i < model_.plan.shards.size(); ++i) {
    if (model_.plan.shards[i].tensor.name == name) index = i;
  }
  if (index == model_.plan.shards.size()) {
    fail(ErrorCode::kInvalidArgument, "the model has no tensor named '{}'", name);
  }
  if (!queue_.pushRead({index, std::move(done)})) {
    fail(ErrorCode::kPeerLost, "the cluster is not ready: {}", notReadyReason());
  }
}

void Driver::serveTensorRead() {
  std::optional<PendingRead> next = queue_.takeRead();
  if (!next) return;
  PendingRead read = std::move(*next);
  TensorReadResult res;
  res.info = listing(read.index);
  const model::TensorShard& shard = model_.plan.shards[read.index];
  // Refused before any rank takes part: a refusal is the caller's error, not a fault.
  // A pipeline split: the stage that holds the tensor gathers it (node/stage_tensor_read.h).
  const int holder =
      model_.topology.pipelined() ? model_.stages.stageHolding(shard.tensor.name) : 0;
  const int holder_node = model_.topology.firstNodeOf(holder);
  std::string why = holder == 0 ? session_->ranks().readRefusal(shard) : "";
  if (!why.empty()) {
    res.error_code = static_cast<int>(ErrorCode::kUnsupported);
    res.error = why;
    read.done(std::move(res));
    return;
  }
  StepCommand cmd;
  cmd.kind = StepKind::kReadTensor;
  cmd.tensor = static_cast<uint32_t>(read.index);
  const auto t0 = Clock::now();
  try {
    StepWatchdog::Scope watched(*watchdog_);
    const collectives::Topology& topo = model_.topology;
    if (holder != 0) {
      // Every node of the holding stage takes part; its first node answers.
      encodeStepCommand(cmd, command_bytes_);
      for (int k = 0; k < topo.nodesPerStage(); ++k) {
        session_->sendToWorker(holder_node + k, command_bytes_);
      }
      res.raw = receiveStageTensor(*session_->mesh(), holder_node, shard, why);
      if (!why.empty()) {  // the holder refused: the caller's error, not a fault
        res.error_code = static_cast<int>(ErrorCode::kUnsupported);
        res.error = why;
        read.done(std::move(res));
        return;
      }
    } else {
      // Replicated tensors pass through (node 0's copy): no collective, workers not involved.
      // In a pipeline split only stage 0's other nodes take part.
      if (shard.kind != model::ShardKind::kReplicate && !topo.pipelined()) {
        broadcastCommand(cmd);
      } else if (shard.kind != model::ShardKind::kReplicate) {
        encodeStepCommand(cmd, command_bytes_);
        for (int k = 1; k < topo.nodesPerStage(); ++k) {
          session_->sendToWorker(k, command_bytes_);
        }
      }
      res.raw = session_->ranks().gatherTensor(shard);
    }
    res.ok = true;
    metrics_->tensor_reads.Increment();
    metrics_->tensor_read_ms.Set(
        std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  } catch (const Error& e) {
    res.error_code = static_cast<int>(e.code());
    res.error = e.what();
    read.done(std::move(res));
    throw;  // a failed collective is a cluster fault
  }
  read.done(std::move(res));
}

}  // namespace tpnode::node
