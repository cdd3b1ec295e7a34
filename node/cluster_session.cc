#include "node/cluster_session.h"

#include <spdlog/spdlog.h>

#include "common/check.h"
#include "common/error.h"
#include "node/collective_setup.h"
#include "node/mesh_setup.h"

namespace tpnode::node {

ClusterSession::ClusterSession(const Options& o, const LoadedModel& model, SessionHooks hooks)
    : options_(o), model_(model), nodes_(model.topology.nodes()), hooks_(hooks) {
  if (nodes_ > 1) {
    if (hooks.log_formation) spdlog::info("[driver] forming the mesh of {} nodes", nodes_);
    mesh::MeshOptions mo = makeMeshOptions(o, model.identity);
    mo.cancel = hooks.cancel;
    if (hooks.connect_timeout) mo.connect_timeout = *hooks.connect_timeout;
    mesh_ = mesh::Mesh::connect(mo);
    if (hooks.meters != nullptr) {
      metered_ = std::make_unique<mesh::MeteredMesh>(*mesh_, *hooks.meters);
    }
    if (mesh_->nodeId() == 0) {
      ledger_ = std::make_unique<CommandLedger>(nodes_);
    } else {
      responder_ = std::make_unique<ProgressResponder>(*mesh_);
    }
  }
}

void ClusterSession::formGroup() {
  auto coll = collectiveOptionsFor(options_);
  if (hooks_.log_formation) spdlog::info("[collectives] {}", describeTransports(options_, coll));
  mesh::Mesh* over = hooks_.meters != nullptr ? metered_.get() : mesh_.get();
  if (!model_.topology.pipelined()) {
    group_ = collectives::NodeGroup::create(over, options_.tp, coll, hooks_.on_peer);
    return;
  }
  // Tensor parallelism inside the stage only: the group is the stage's ranks, over a view of
  // the stage's nodes (a stage of one node needs no mesh).
  const collectives::Topology& topo = model_.topology;
  if (topo.nodesPerStage() > 1) {
    stage_mesh_ = std::make_unique<mesh::SubMesh>(*over, topo.firstNodeOf(topo.stage()),
                                                  topo.nodesPerStage());
  }
  // A lost node aborts this stage's group (its ranks may wait in a collective) and reaches the
  // hooks; the view passes its nodes' events on to the group's own callback.
  auto group_slot = std::make_shared<std::weak_ptr<collectives::NodeGroup>>();
  mesh_->setEventCallback([group_slot, view = stage_mesh_.get(),
                           forward = hooks_.on_peer](const mesh::PeerEvent& event) {
    if (view != nullptr) view->deliver(event);
    if (event.kind == mesh::PeerEventKind::kLost) {
      if (auto g = group_slot->lock()) {
        g->abort(ErrorCode::kPeerLost,
                 fmt::format("[pipeline] node {} lost: {}", event.peer, event.reason));
      }
    }
    if (forward) forward(event);
  });
  group_ = collectives::NodeGroup::create(stage_mesh_.get(), options_.tp, coll);
  *group_slot = group_;
}

ClusterSession::~ClusterSession() {
  pipeline_.reset();
  ranks_.reset();
  group_.reset();
  if (mesh_) mesh_->setEventCallback({});  // the callback may point at stage_mesh_
}

void ClusterSession::loadRanks(const RankSetOptions& options) {
  if (responder_ && options.kv_tier) responder_->setTierTally(options.kv_tier->tally);
  if (!model_.topology.pipelined()) {
    ranks_ = std::make_unique<RankSet>(*model_.file, model_.config, model_.plan, group_, options);
  } else {
    RankSetOptions staged = options;
    staged.stage = model_.stages.part(model_.topology.stage());
    staged.stage_first_rank = model_.topology.firstRankOf(model_.topology.stage());
    ranks_ = std::make_unique<RankSet>(*model_.file, model_.config, model_.plan, group_, staged);
    mesh::Mesh* over = hooks_.meters != nullptr ? metered_.get() : mesh_.get();
    pipeline_ = std::make_unique<StagePipeline>(*over, model_.topology, *ranks_,
                                                model_.config.n_embd, model_.stages.ranges);
  }
  // The ranks hold their own copies now; the file stays mapped for a re-formed cluster's reload.
  model_.file->releaseResidentPages();
}

void ClusterSession::runStep(std::span<const model::BatchToken> batch, std::vector<float>& logits,
                             std::span<const model::TapSpec> taps, model::TapSink* out) {
  if (!pipeline_) {
    model::TapSink* sink = out != nullptr && !taps.empty() ? out : nullptr;
    if (sink != nullptr) sink->specs.assign(taps.begin(), taps.end());
    ranks_->run(batch, logits, sink);
    return;
  }
  pipeline_->run(batch, logits, taps, out);
}

bool ClusterSession::keepsStepsInFlight() const {
  return pipeline_ != nullptr && model_.topology.stage() == 0;
}

int ClusterSession::stepsInFlightLimit() const {
  return pipeline_ != nullptr ? model_.topology.stages() : 1;
}

void ClusterSession::beginStep(std::span<const model::BatchToken> batch,
                               std::span<const model::TapSpec> taps) {
  TP_CHECK(keepsStepsInFlight(), "beginStep() outside a pipeline's stage 0");
  pipeline_->begin(batch, taps);
}

void ClusterSession::finishStep(std::vector<float>& logits, uint64_t retire, model::TapSink* out) {
  TP_CHECK(keepsStepsInFlight() && pipeline_->inFlight() > 0, "finishStep() with no step begun");
  const collectives::Topology& topo = model_.topology;
  if (topo.nodeId() == 0) {
    StepCommand cmd;
    cmd.kind = StepKind::kRetire;
    cmd.step_id = pipeline_->oldestInFlight();
    encodeStepCommand(cmd, command_bytes_);
    for (int k = 1; k < topo.nodesPerStage(); ++k) sendToWorker(k, command_bytes_);
  } else if (retire != pipeline_->oldestInFlight()) {
    fail(ErrorCode::kInvalidData, "a retire command names step {}, the oldest in flight is {}",
         retire, pipeline_->oldestInFlight());
  }
  pipeline_->finish(logits, out);
}

std::vector<bool> ClusterSession::runKvTier(std::span<const KvTierBlock> stores,
                                            std::span<const KvTierBlock> loads) {
  return pipeline_ ? pipeline_->runKvTier(stores, loads) : ranks_->runKvTier(stores, loads);
}

std::vector<uint64_t> ClusterSession::expertLoad() const {
  return pipeline_ ? pipeline_->expertLoad() : ranks_->expertLoadByRank();
}

uint64_t ClusterSession::overlappedSteps() const {
  return pipeline_ != nullptr ? pipeline_->overlappedSteps() : 0;
}

size_t ClusterSession::stepsInFlight() const {
  return pipeline_ != nullptr ? pipeline_->inFlight() : 0;
}

void ClusterSession::reportLoaded() {
  const std::byte loaded[1] = {std::byte{1}};
  mesh_->send(0, kTagControlAck, loaded);
}

void ClusterSession::awaitLoaded() {
  if (!mesh_) return;
  std::byte ack[1];
  for (int p = 1; p < nodes_; ++p) mesh_->recv(p, kTagControlAck, ack);
}

void ClusterSession::sendToWorkers(std::span<const std::byte> bytes) {
  if (!mesh_) return;
  for (int p = 1; p < mesh_->nodeCount(); ++p) sendToWorker(p, bytes);
}

void ClusterSession::sendToWorker(int node, std::span<const std::byte> bytes) {
  if (!mesh_) return;
  ledger_->noteSent(node);
  mesh_->send(node, kTagControl, bytes);
}

void ClusterSession::dismissWorkers(StepKind kind, StepWatchdog& watchdog) {
  if (!mesh_) return;
  StepCommand cmd;
  cmd.kind = kind;
  encodeStepCommand(cmd, command_bytes_);
  std::byte ack[1];
  for (int p = 1; p < mesh_->nodeCount(); ++p) {
    StepWatchdog::Scope bounded(watchdog, p);  // a peer that does not acknowledge is lost
    try {
      if (!mesh_->peerAlive(p)) continue;
      mesh_->send(p, kTagControl, command_bytes_);
      mesh_->recv(p, kTagControlAck, ack);
    } catch (const Error& e) {
      if (kind == StepKind::kShutdown && !mesh_->peerAlive(p)) {
        // Gone before its acknowledgement arrived (its loss is logged where the mesh reports
        // it): what the shutdown asked for.
        spdlog::info("[driver] node {} left before acknowledging the shutdown: {}", p, e.what());
      } else {
        spdlog::warn("[driver] node {} did not acknowledge {}: {}", p,
                     kind == StepKind::kReset ? "the reset" : "the shutdown", e.what());
      }
    }
  }
}

void ClusterSession::acknowledge() {
  const std::byte ack[1] = {std::byte{1}};
  mesh_->send(0, kTagControlAck, ack);
}

void ClusterSession::close() {
  pipeline_.reset();
  ranks_.reset();
  group_.reset();
  if (mesh_) mesh_->setEventCallback({});
  if (mesh_) mesh_->shutdown();
}

}  // namespace tpnode::node
