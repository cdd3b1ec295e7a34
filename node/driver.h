// Driver: node 0's engine. It owns the request queue, tokenization and sampling, and one loop
// thread that forms the cluster and then runs it step by step: plan the step (continuous
// batching, node/scheduler.h) -> send the StepCommand to every worker -> run the local ranks
// (all ranks of all nodes meet in the all-reduces) -> sample on node 0 -> report tokens.
//
// Contract
// - Engine methods may be called from any thread (see node/engine.h).
// - Faults: a lost worker (seen by the mesh's liveness or a failed collective) fails every
//   in-flight request with finish_reason "error" and the cause, makes ready() false, tells the
//   surviving workers to re-form (kReset), and re-forms the cluster (waiting for the lost node
//   to come back) unless options.reform_on_fault is false. An attempt to re-form starts
//   no sooner than 2 s after the previous one began (doubling to 30 s, at most half of
//   --connect-timeout so that surviving workers still find node 0). Nothing is dropped
//   silently.
// - Startup: when the cluster cannot form the first time (this node cannot listen on its mesh
//   port, a node is still missing after --connect-timeout, a shard does not load), the loop
//   ends at once: ready() stays false, loopDone() turns true and lastError() says why; the
//   caller reports it and exits. shutdown() during formation ends it quietly.
// - Progress: a step, tensor read or reset acknowledgement that peers do not complete within
//   --step-timeout makes the node that stalled it lost like a dead peer (every peer when node 0
//   cannot tell which; node/step_watchdog.h).
// - Tensor reads (readTensor) queue like requests; the loop serves at most one between two
//   steps (kReadTensor to every worker, then RankSet::gatherTensor), so a running batch waits
//   at most one read per step and its tokens do not change (no KV or sampler state is touched).
// - Taps (GenerationRequest::taps): the step command names the step's taps and marks the
//   prompt positions of tapping requests (SeqChunk::n_tap); global rank 0 copies the rows
//   (model/taps.h), or in a pipeline split the stage holding the layer, which sends them to
//   node 0 (node/stage_pipeline.h); a "logits" tap asks for every prompt row (kLogitsAll).
//   They are returned on the final event.
// - The Redis KV tier (--kv-cache-redis-url): before the step it plans them with, node 0 sends
//   every worker a kKvTier command with the blocks to store and to load (runTier), also in a
//   pipeline split (after the steps in flight); only a load waits for the answer, from every
//   rank of every stage (node/stage_pipeline.h).
// - shutdown() stops the loop: workers receive kShutdown and exit 0.
//
// Parts (each in its own file): node/request_checks.h (what submit() refuses),
// node/chat_fallback.h (renderChat), node/request_queue.h (callers -> loop thread),
// node/request_tracker.h (admission, sampling, final events), node/cluster_session.h (the
// formed cluster, shared with the workers), node/step_batch.h (step command -> batch, shared
// with the workers), node/driver_metrics.h (Prometheus). The Driver itself owns the loop:
// forming and re-forming the cluster, and running each step.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "model/taps.h"
#include "node/cluster_session.h"
#include "node/driver_metrics.h"
#include "node/engine.h"
#include "node/kv_redis_options.h"
#include "node/loaded_model.h"
#include "node/rank_set.h"
#include "node/request_queue.h"
#include "node/request_tracker.h"
#include "node/scheduler.h"
#include "node/step_watchdog.h"
#include "node/tier_counter_poll.h"

namespace tpnode::node {

struct DriverOptions {
  SchedulerOptions scheduler;
  RankSetOptions ranks;
  bool reform_on_fault = true;
  bool record_timings = false;  // keep RequestTiming per request (the CLI's --prompt)
};

class Driver final : public Engine {
 public:
  Driver(const Options& options, const LoadedModel& model, DriverOptions driver_options);
  ~Driver() override;

  void start();
  void shutdown();

  // Engine
  ModelInfo modelInfo() const override;
  bool ready() const override { return ready_.load(); }
  std::string notReadyReason() const override;
  std::vector<int32_t> tokenize(const std::string& text, bool add_special) const override;
  std::string detokenize(const std::vector<int32_t>& ids) const override;
  std::string tokenPiece(int32_t id) const override;
  std::string renderChat(const std::vector<ChatMessage>& messages) const override;
  uint64_t submit(GenerationRequest request,
                  std::function<void(const TokenEvent&)> on_event) override;
  void cancel(uint64_t request_id) override;
  std::vector<prometheus::MetricFamily> metricFamilies() const override;
  std::vector<TensorListing> listTensors() const override;
  void readTensor(const std::string& name, std::function<void(TensorReadResult)> done) override;
  int layerCount() const override { return static_cast<int>(model_.config.n_layer); }

  // For --dump-logits: the next submitted request keeps a logits row for every position.
  void keepAllLogitsOfNextRequest() { keep_all_logits_next_ = true; }
  // The rows kept for request `id` (moved out), and its timing.
  std::vector<float> takeLogits(uint64_t id);
  RequestTiming timing(uint64_t id);
  // True once the loop thread has ended (shutdown, or a fault with reform_on_fault off).
  bool loopDone() const { return loop_done_.load(); }
  std::string lastError() const;

 private:
  void loop();
  bool formCluster();
  void teardown(bool reset_workers);
  struct InFlightStep {
    PlannedStep step;
    std::chrono::steady_clock::time_point t0;
    std::vector<uint64_t> awaited;  // CommandLedger::snapshot() once its commands went out
    // As begun (logits taps are collected from it); its block tables point into step.command.
    std::vector<model::BatchToken> batch;
  };
  void runStep();
  PlannedStep planStep();
  void runWholeStep(PlannedStep step);
  void pumpPipeline();
  void beginStep(PlannedStep step);
  void finishStep();
  void takeResults(const PlannedStep& step, std::chrono::steady_clock::time_point t0);
  void publishBlockStats();               // block and prefix figures to /metrics and /props
  void runTier(const PlannedStep& step);  // the Redis KV tier's stores and loads, if any
  void broadcastCommand(const StepCommand& command);
  void serveTensorRead();
  // Names the step's taps in its command and marks its tapped tokens (before it is sent).
  void markTaps(PlannedStep& step);
  // `sink`: the step's taps (specs = step.command.taps); `batch`: the step's batch.
  void collectTaps(const PlannedStep& step, const model::TapSink& sink,
                   std::span<const model::BatchToken> batch);
  TensorListing listing(size_t index) const;

  const Options options_;
  const LoadedModel& model_;
  const DriverOptions driver_options_;

  std::thread loop_thread_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> stop_{false};
  std::atomic<bool> fault_{false};  // set by the mesh callback when a peer is lost
  std::atomic<bool> keep_all_logits_next_{false};
  std::atomic<bool> loop_done_{false};
  std::atomic<int> kv_blocks_total_{0}, kv_blocks_free_{0};  // for /props
  bool formed_once_ = false;                                 // loop thread only
  PrefixStats seen_;  // loop thread only: what /metrics counted so far
  uint64_t seen_evictions_ = 0;

  mutable std::mutex mu_;
  std::string not_ready_reason_;  // GUARDED_BY(mu_)
  std::string last_error_;        // GUARDED_BY(mu_)

  RequestQueue queue_;                      // any thread -> the loop thread
  std::unique_ptr<StepWatchdog> watchdog_;  // made by start(), before the loop thread

  // Updated by the loop thread, read by /metrics from HTTP threads (atomic values).
  // Declared before the loop thread's parts, which refer to it.
  std::unique_ptr<DriverMetrics> metrics_;

  // Loop thread only:
  std::unique_ptr<ClusterSession> session_;
  std::unique_ptr<TierCounterPoll> tier_poll_;    // the workers' KV tier counters; session_'s mesh
  std::unique_ptr<RedisTierLookup> tier_lookup_;  // --kv-cache-redis-url; before scheduler_
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<RequestTracker> requests_;
  std::deque<InFlightStep> in_flight_;  // pipeline splits: begun, not finished, oldest first
  std::vector<model::BatchToken> batch_;
  std::vector<float> logits_;
  std::vector<std::byte> command_bytes_;
  BlockTableMirror wire_tables_;  // the block tables the workers hold (this session's)
};

}  // namespace tpnode::node
