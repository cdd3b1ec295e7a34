#include "node/cluster_session.h"

#include <spdlog/spdlog.h>

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
  group_ = collectives::NodeGroup::create(over, options_.tp, coll, hooks_.on_peer);
}

ClusterSession::~ClusterSession() {
  ranks_.reset();
  group_.reset();
}

void ClusterSession::loadRanks(const RankSetOptions& options) {
  ranks_ = std::make_unique<RankSet>(*model_.file, model_.config, model_.plan, group_, options);
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
  for (int p = 1; p < mesh_->nodeCount(); ++p) {
    ledger_->noteSent(p);
    mesh_->send(p, kTagControl, bytes);
  }
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
      spdlog::warn("[driver] node {} did not acknowledge {}: {}", p,
                   kind == StepKind::kReset ? "the reset" : "the shutdown", e.what());
    }
  }
}

void ClusterSession::acknowledge() {
  const std::byte ack[1] = {std::byte{1}};
  mesh_->send(0, kTagControlAck, ack);
}

void ClusterSession::close() {
  ranks_.reset();
  group_.reset();
  if (mesh_) mesh_->shutdown();
}

}  // namespace tpnode::node
