// ClusterSession: one formed cluster as this node sees it, and the control exchanges that
// node 0 (the Driver) and the workers share. It owns the mesh to the other nodes (none on a
// single node), the collectives' NodeGroup over it and this node's RankSet, and speaks the
// node layer's side of the control tags (node/mesh_setup.h): the "ranks loaded" handshake that
// makes node 0 ready, the step commands, and the acknowledged end of a session (kReset after a
// fault, kShutdown at the end).
//
// Contract
// - One session per formation: a fault ends it and the next formation makes a new one. Node 0
//   makes it on the Driver's loop thread, a worker on its main thread; every method is called
//   from that thread. `hooks.on_peer` runs on the mesh's thread (NodeGroup::create).
// - The constructor forms the mesh (more than one node); it throws Error when the mesh cannot
//   form (a node missing past the connect timeout, a refused handshake, a port taken,
//   *hooks.cancel turning true). formGroup() then makes the NodeGroup (collective: every node
//   calls it).
// - Order of formation: constructor, formGroup(), loadRanks(), then reportLoaded() on every
//   worker and awaitLoaded() on node 0. Destruction (or close()) releases the ranks, then the
//   group, then the mesh: each uses the next.
// - Node 0 only: sendToWorkers(), dismissWorkers(), ledger() (the step commands sent to each
//   worker, for the StepWatchdog). Workers only: reportLoaded(), acknowledge(), progress()
//   (their ProgressResponder answers node 0's progress probes while a step runs, and its KV
//   tier counter queries with the tally that loadRanks() hands it: RankSetOptions::kv_tier).
// - Pipeline stages (the topology has more than one): formGroup() makes a NodeGroup of this
//   stage's ranks alone (tensor parallelism stays inside the stage; a stage of several nodes
//   meets over a mesh::SubMesh of its nodes) and takes the mesh's event callback itself (a lost
//   peer aborts the group and reaches hooks.on_peer); loadRanks() loads
//   this node's stage; runStep() passes the hidden state between stages (node/stage_pipeline.h).
// - Steps in flight (pipeline splits; stage 0 only, keepsStepsInFlight()): beginStep() runs
//   stage 0's part of a step and returns; finishStep() completes the oldest step begun. On
//   node 0, finishStep() first tells the other nodes of stage 0 (if any) to finish it too
//   (StepKind::kRetire), so that every rank of stage 0 meets in the head's collectives in the
//   same order; a worker of stage 0 calls finishStep() when that command arrives.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "collectives/hierarchical.h"
#include "mesh/mesh.h"
#include "mesh/metered_mesh.h"
#include "mesh/sub_mesh.h"
#include "node/loaded_model.h"
#include "node/options.h"
#include "node/progress_responder.h"
#include "node/rank_set.h"
#include "node/stage_pipeline.h"
#include "node/stall_probe.h"
#include "node/step_command.h"
#include "node/step_watchdog.h"

namespace tpnode::node {

struct SessionHooks {
  const std::atomic<bool>* cancel = nullptr;  // forming the mesh gives up once it turns true
  std::optional<std::chrono::milliseconds> connect_timeout;  // replaces --connect-timeout
  // Node 0: the collectives' traffic is counted per link here; control messages go around it.
  mesh::LinkMeters* meters = nullptr;
  bool log_formation = false;  // log the mesh forming and the transports (node 0 does)
  std::function<void(const mesh::PeerEvent&)> on_peer;  // peer events, mesh thread
};

class ClusterSession {
 public:
  ClusterSession(const Options& options, const LoadedModel& model, SessionHooks hooks);
  ~ClusterSession();
  ClusterSession(const ClusterSession&) = delete;
  ClusterSession& operator=(const ClusterSession&) = delete;

  // Makes the collectives' NodeGroup over the mesh (throws when a peer is lost meanwhile).
  void formGroup();
  // Loads this node's ranks of the model (throws on a shard that does not load).
  void loadRanks(const RankSetOptions& options);
  // One step of the batch on this node's ranks: RankSet::run, or the pipeline's step. Logits
  // as RankSet::run gives them on node 0. `taps`: the step's (StepCommand::taps); `out` (node 0,
  // may be null): every tap's rows, specs = taps. Without a pipeline only node 0's ranks take
  // taps; in a pipeline the stage holding a tap's layer takes it and sends it to node 0.
  void runStep(std::span<const model::BatchToken> batch, std::vector<float>& logits,
               std::span<const model::TapSpec> taps = {}, model::TapSink* out = nullptr);
  // True on the nodes of a pipeline's stage 0: they may keep steps in flight (see above).
  bool keepsStepsInFlight() const;
  // The steps node 0 keeps in flight at most: the pipeline's stages (1 without a pipeline).
  int stepsInFlightLimit() const;
  // Stage 0: begins a step; finishes the oldest (`retire`: the step a kRetire command named,
  // checked on a worker; 0 on node 0). Logits as runStep() gives them.
  // Taps as runStep(): given to beginStep(), returned by finishStep() on node 0.
  void beginStep(std::span<const model::BatchToken> batch,
                 std::span<const model::TapSpec> taps = {});
  void finishStep(std::vector<float>& logits, uint64_t retire = 0, model::TapSink* out = nullptr);
  // The Redis KV tier's command (StepKind::kKvTier), on every node in command order: stores,
  // then loads, the blocks on this node's ranks (RankSet::runKvTier; in a pipeline split every
  // stage's, StagePipeline::runKvTier). Node 0 gets, for each of `loads`, whether every rank of
  // the cluster imported it; a worker's result is its own (or its stage's) and may be dropped.
  std::vector<bool> runKvTier(std::span<const KvTierBlock> stores,
                              std::span<const KvTierBlock> loads);
  // Node 0, a mixture of experts: the token-expert pairs routed to each rank's experts
  // (RankSet::expertLoadByRank; in a pipeline every stage's ranks, stage after stage,
  // StagePipeline::expertLoad). Empty for dense models. Between steps.
  std::vector<uint64_t> expertLoad() const;
  // Stage 0: steps begun while another was in flight, and steps in flight now.
  uint64_t overlappedSteps() const;
  size_t stepsInFlight() const;

  // Worker: tells node 0 that its ranks are loaded.
  void reportLoaded();
  // Node 0: waits until every worker has reported its ranks loaded.
  void awaitLoaded();

  // Node 0: sends encoded command bytes (a kStep or kReadTensor) to every worker, in node
  // order, counting them in ledger().
  void sendToWorkers(std::span<const std::byte> bytes);
  // Node 0: the same to one worker (a pipeline split's tensor read goes to one stage's nodes).
  void sendToWorker(int node, std::span<const std::byte> bytes);
  // Node 0: tells every live worker to reset (kReset) or shut down (kShutdown) and waits for
  // each acknowledgement, each bounded by `watchdog` (a worker that does not acknowledge within
  // --step-timeout is lost); a worker that does not answer is logged.
  void dismissWorkers(StepKind kind, StepWatchdog& watchdog);
  // Node 0: the step commands sent to each worker (null on a single node).
  const CommandLedger* ledger() const { return ledger_.get(); }
  CommandLedger* ledger() { return ledger_.get(); }
  // Worker: acknowledges node 0's kReset or kShutdown.
  void acknowledge();
  // Worker: counts the step commands received and taken up, for node 0's progress probes.
  ProgressResponder& progress() { return *responder_; }

  // Releases the ranks (a failed session's ranks go before it waits for node 0).
  void dropRanks() {
    pipeline_.reset();
    ranks_.reset();
  }
  // Releases the ranks and the group and shuts the mesh down.
  void close();

  mesh::Mesh* mesh() const { return mesh_.get(); }  // null on a single node
  RankSet& ranks() { return *ranks_; }
  const RankSet& ranks() const { return *ranks_; }
  int nodes() const { return nodes_; }

 private:
  const Options& options_;  // outlives the session (the Driver's copy, or main's)
  const LoadedModel& model_;
  const int nodes_;
  const SessionHooks hooks_;
  std::unique_ptr<mesh::Mesh> mesh_;           // null for a single node
  std::unique_ptr<mesh::Mesh> metered_;        // node 0: counts the collectives' traffic over mesh_
  std::unique_ptr<mesh::SubMesh> stage_mesh_;  // pipeline stages of several nodes: their view
  std::unique_ptr<CommandLedger> ledger_;      // node 0 of a mesh
  std::unique_ptr<ProgressResponder> responder_;  // workers; uses mesh_, so declared after it
  std::shared_ptr<collectives::NodeGroup> group_;
  std::unique_ptr<RankSet> ranks_;
  std::unique_ptr<StagePipeline> pipeline_;  // pipeline stages only; uses ranks_ and the mesh
  std::vector<std::byte> command_bytes_;
};

}  // namespace tpnode::node
