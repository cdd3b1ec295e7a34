#include "node/worker.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/error.h"
#include "common/settings.h"
#include "mesh/mesh.h"
#include "node/cluster_session.h"
#include "node/kv_redis_options.h"
#include "node/mesh_setup.h"
#include "node/rank_set_options.h"
#include "node/split_choice.h"
#include "node/stage_rejoin.h"
#include "node/stage_tensor_read.h"
#include "node/step_batch.h"
#include "node/step_command.h"

namespace tpnode::node {
namespace {

enum class Outcome { kShutdown, kReform };

StepLimits stepLimits(const Options& o, const LoadedModel& m) {
  StepLimits limits;
  limits.max_slot = static_cast<uint32_t>(std::max(1, o.parallel) - 1);
  limits.n_vocab = static_cast<int32_t>(m.config.n_vocab);
  limits.max_tokens = static_cast<uint32_t>(std::max(1, o.parallel)) *
                      static_cast<uint32_t>(std::max(1, o.ctx_size));
  limits.n_tensors = static_cast<uint32_t>(m.plan.shards.size());
  limits.kv_block_size = static_cast<uint32_t>(std::max(1, o.kv_block_size));
  limits.kv_blocks = static_cast<uint32_t>(o.kvBlocks());
  limits.max_ctx = static_cast<uint32_t>(std::max(1, o.ctx_size));
  limits.n_layer = static_cast<int32_t>(m.config.n_layer);
  limits.max_taps = 3 * static_cast<uint32_t>(m.config.n_layer);  // distinct layer/point pairs
  return limits;
}

// Room for the largest command the limits allow: every slot cleared, every slot with tokens;
// or a KV tier command naming every block to store and to load.
size_t commandBufferBytes(const StepLimits& limits) {
  const size_t table = (size_t{limits.max_ctx} + limits.kv_block_size - 1) / limits.kv_block_size;
  const size_t step = 32 + (28 + 4 * table) * (size_t{limits.max_slot} + 1) +
                      4 * size_t{limits.max_tokens} + 4 + 8 * size_t{limits.max_taps};
  const size_t tier = 40 + 2 * 12 * size_t{limits.kv_blocks};  // kKvTier: every block, twice
  return std::max(step, tier);
}

// TPNODE_TEST_STALL_AT_STEP (worker.h): the step number to stall at, 0 for none.
uint64_t stallAtStep() {
  const std::optional<std::string> v = settings::envValue("TPNODE_TEST_STALL_AT_STEP");
  if (!v) return 0;
  char* end = nullptr;
  unsigned long long n = std::strtoull(v->c_str(), &end, 10);
  return (end != nullptr && *end == '\0') ? n : 0;
}

// Test-only: stays silent (the mesh keeps heartbeating) until the driver drops this node.
void stallUntilDropped(mesh::Mesh& mesh, uint64_t step) {
  spdlog::warn("[worker] TPNODE_TEST_STALL_AT_STEP: stalling at step {} (test fault injection)",
               step);
  while (mesh.peerAlive(0)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

std::atomic<uint64_t> g_steps_received{0};

// Serves one formed cluster until the driver says shutdown or reset. Throws on a fault.
Outcome serve(ClusterSession& session, const Options& o, const LoadedModel& m) {
  mesh::Mesh& mesh = *session.mesh();
  RankSet& ranks = session.ranks();
  static const uint64_t stall_at = stallAtStep();
  const StepLimits limits = stepLimits(o, m);
  std::vector<std::byte> buffer(commandBufferBytes(limits));
  std::vector<model::BatchToken> batch;
  std::vector<float> logits;
  BlockTableMirror tables;  // this session's: node 0 sends the blocks appended since
  for (;;) {
    size_t n = mesh.recv(0, kTagControl, buffer);
    StepCommand cmd = decodeStepCommand(std::span(buffer.data(), n), limits);
    tables.fromWire(cmd, limits);
    if (cmd.kind == StepKind::kShutdown) {
      session.acknowledge();
      return Outcome::kShutdown;
    }
    if (cmd.kind == StepKind::kReset) {
      session.acknowledge();
      return Outcome::kReform;
    }
    session.progress().noteReceived();
    if (cmd.kind == StepKind::kRetire) {  // stage 0 of a pipeline: node 0 finishes a step
      session.progress().noteBegun();
      session.finishStep(logits, cmd.step_id);
      continue;
    }
    if (cmd.kind == StepKind::kKvTier) {  // the Redis KV tier: store, load, agree
      session.progress().noteBegun();
      session.runKvTier(cmd.stores, cmd.loads);
      continue;
    }
    if (cmd.kind == StepKind::kReadTensor) {
      session.progress().noteBegun();
      const model::TensorShard& shard = m.plan.shards[cmd.tensor];
      const collectives::Topology& topo = m.topology;
      if (topo.pipelined() && topo.stage() != 0 &&
          topo.nodeId() == topo.firstNodeOf(topo.stage())) {
        answerStageTensorRead(*session.mesh(), ranks, shard);  // gathered here, sent to node 0
      } else if (topo.pipelined()) {  // another node of the holding stage: takes part
        if (ranks.readRefusal(shard).empty()) ranks.gatherTensor(shard, /*assemble=*/false);
      } else {  // node 0 keeps the result; ours is dropped
        ranks.gatherTensor(shard, /*assemble=*/false);
      }
      continue;
    }
    if (const uint64_t step = ++g_steps_received; stall_at != 0 && step == stall_at) {
      stallUntilDropped(mesh, step);
    }
    expandStep(cmd, batch);
    session.progress().noteBegun();  // node 0's progress probe sees this step taken up
    if (session.keepsStepsInFlight()) {
      session.beginStep(batch, cmd.taps);  // finished when node 0 says (kRetire)
    } else {
      session.runStep(batch, logits, cmd.taps);
    }
  }
}

// After a fault that did not take the driver: wait for its kReset (or shutdown).
Outcome awaitDriver(ClusterSession& session, const StepLimits& limits) {
  std::vector<std::byte> buffer(commandBufferBytes(limits));
  for (;;) {
    size_t n = session.mesh()->recv(0, kTagControl, buffer);
    StepCommand cmd = decodeStepCommand(std::span(buffer.data(), n), limits);
    if (cmd.kind == StepKind::kStep || cmd.kind == StepKind::kReadTensor ||
        cmd.kind == StepKind::kRetire || cmd.kind == StepKind::kKvTier)
      continue;  // sent before the fault
    session.acknowledge();
    return cmd.kind == StepKind::kShutdown ? Outcome::kShutdown : Outcome::kReform;
  }
}

}  // namespace

int runWorker(const Options& given, const LoadedModel& loaded, const Placement& placement) {
  Options o = given;  // o.pp: the stages this node runs (node 0's, under --split auto)
  std::unique_ptr<LoadedModel> restaged;  // node 0's stages, when they changed (below)
  const LoadedModel* model = &loaded;
  RankSetOptions ro = rankSetOptions(o, placement);
  ro.kv_tier = kvTierOptionsFrom(o, *model, placement.gpu);
  bool rejoining = false;  // the driver was lost: connect() waits --rejoin-timeout for it
  bool first = true;       // this process's first formation
  for (;;) {
    SessionHooks hooks;
    if (rejoining) {
      hooks.connect_timeout =
          std::chrono::milliseconds(static_cast<int64_t>(std::max(0.0, o.rejoin_timeout_s) * 1e3));
    }
    std::unique_ptr<ClusterSession> session;
    std::string cannot_load;  // why this node cannot load the stages node 0 chose
    int chosen_stages = 0;
    try {
      // Stages chosen by --split auto: node 0 sends them again (node/stage_rejoin.h); a
      // restarted node 0 may have chosen others, which this node loads there (node 0 learns
      // why when it cannot).
      if (o.pp_chosen && !first) {
        std::unique_ptr<LoadedModel> chosen;
        const int stages =
            agreeOnChosenStages(o, *model, nullptr, hooks.connect_timeout, [&](int s) {
              chosen_stages = s;
              cannot_load = loadChosenStages(o, s, chosen);
              return cannot_load;
            });
        if (stages != o.pp) {
          o.pp = stages;
          restaged = std::move(chosen);
          model = restaged.get();
          ro.kv_tier = kvTierOptionsFrom(o, *model, placement.gpu);
        }
      }
      first = false;
      session = std::make_unique<ClusterSession>(o, *model, std::move(hooks));
    } catch (const Error& e) {
      if (!cannot_load.empty()) {
        spdlog::error("[worker] could not load the {} stage(s) node 0 chose: {}; exiting",
                      chosen_stages, cannot_load);  // node 0 was told why
        return 3;
      }
      if (!rejoining) throw;
      spdlog::error(
          "[worker] the driver (node 0) was lost and did not come back within --rejoin-timeout "
          "{} s ({}); exiting",
          o.rejoin_timeout_s, e.what());
      return 3;
    }
    if (rejoining) spdlog::info("[worker] node {} rejoined the driver (node 0)", o.node_id);
    rejoining = false;
    session->formGroup();
    Outcome outcome = Outcome::kReform;
    std::string driver_lost;  // non-empty: why the driver is gone
    try {
      session->loadRanks(ro);
      session->reportLoaded();
      spdlog::info("[worker] node {} ready: {} local rank(s) serving driver node 0", o.node_id,
                   o.tp);
      outcome = serve(*session, o, *model);
    } catch (const Error& e) {
      session->dropRanks();
      if (!session->mesh()->peerAlive(0)) {
        driver_lost = e.what();
      } else {
        spdlog::warn("[worker] cluster fault: {}; waiting for the driver to re-form", e.what());
        try {
          outcome = awaitDriver(*session, stepLimits(o, *model));
        } catch (const Error& e2) {
          driver_lost = e2.what();
        }
      }
    }
    session->dropRanks();
    if (!driver_lost.empty()) {
      spdlog::warn(
          "[worker] the driver (node 0) was lost: {}; trying to rejoin it for up to {} s "
          "(--rejoin-timeout)",
          driver_lost, o.rejoin_timeout_s);
      session->close();
      rejoining = true;
      continue;
    }
    if (outcome == Outcome::kShutdown) {
      spdlog::info("[worker] node {}: shutdown by the driver", o.node_id);
      session->close();
      return 0;
    }
    spdlog::info("[worker] node {}: re-forming the cluster", o.node_id);
    session->close();
  }
}

}  // namespace tpnode::node
