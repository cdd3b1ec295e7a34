#include "node/driver.h"

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#include "common/error.h"
#include "node/chat_fallback.h"
#include "node/request_checks.h"
#include "node/stage_rejoin.h"
#include "node/step_batch.h"
#include "node/step_command.h"

namespace tpnode::node {

using Clock = std::chrono::steady_clock;

namespace {

// Between two attempts to re-form the cluster after a fault (doubling, reset once it forms).
constexpr auto kReformBackoffMin = std::chrono::seconds(2);
constexpr auto kReformBackoffMax = std::chrono::seconds(30);
// How often node 0 asks the workers for their KV tier counters (node/tier_counter_poll.h).
constexpr auto kTierPollInterval = std::chrono::milliseconds(1000);

}  // namespace

Driver::Driver(const Options& options, const LoadedModel& model, DriverOptions driver_options)
    : options_(options),
      model_(model),
      driver_options_(driver_options),
      metrics_(std::make_unique<DriverMetrics>(model.topology.nodes(), model.topology.nodeId())) {
  if (driver_options_.ranks.kv_tier) metrics_->setTierTally(driver_options_.ranks.kv_tier->tally);
  std::lock_guard lock(mu_);
  not_ready_reason_ = "the cluster is forming";
}

Driver::~Driver() {
  shutdown();
}

void Driver::start() {
  watchdog_ = std::make_unique<StepWatchdog>(std::chrono::milliseconds(
      static_cast<int64_t>(std::max(0.0, options_.step_timeout_s) * 1e3)));
  loop_thread_ = std::thread([this] { loop(); });
}

void Driver::shutdown() {
  stop_ = true;
  queue_.stop();  // wakes a loop waiting for work or for its next attempt to form
  if (loop_thread_.joinable()) loop_thread_.join();
  watchdog_.reset();
}

ModelInfo Driver::modelInfo() const {
  ModelInfo info;
  info.id = model_.name;
  info.context_length = driver_options_.scheduler.ctx_size;
  info.n_vocab = static_cast<int>(model_.config.n_vocab);
  info.n_layer = static_cast<int>(model_.config.n_layer);
  info.n_embd = static_cast<int>(model_.config.n_embd);
  info.has_chat_template = model_.has_chat_template;  // renderChat() has a fallback anyway
  info.slots = driver_options_.scheduler.slots;
  info.kv_block_size = driver_options_.scheduler.kv_block_size;
  info.kv_blocks_total = kv_blocks_total_.load();
  info.kv_blocks_free = kv_blocks_free_.load();
  info.prefix_cache = driver_options_.scheduler.prefix_cache;
  info.kv_redis = driver_options_.ranks.kv_tier.has_value();
  info.kv_redis_ttl_s =
      info.kv_redis ? static_cast<int>(driver_options_.ranks.kv_tier->store.ttl.count()) : 0;
  info.path = options_.model;
  info.chat_template = model_.chat_template;
  return info;
}

std::string Driver::notReadyReason() const {
  std::lock_guard lock(mu_);
  return not_ready_reason_;
}

std::vector<int32_t> Driver::tokenize(const std::string& text, bool add_special) const {
  return model_.tokenizer->encode(text, add_special, /*parse_special=*/true);
}

std::string Driver::detokenize(const std::vector<int32_t>& ids) const {
  return model_.tokenizer->decode(ids);
}

std::string Driver::tokenPiece(int32_t id) const {
  if (id < 0 || id >= model_.config.n_vocab) return {};
  return model_.tokenizer->tokenToPiece(id, /*special=*/true);
}

std::string Driver::renderChat(const std::vector<ChatMessage>& messages) const {
  return renderChatOrFallback(model_, messages);
}

uint64_t Driver::submit(GenerationRequest request,
                        std::function<void(const TokenEvent&)> on_event) {
  checkRequest(request, driver_options_.scheduler.ctx_size, model_.config);
  // The queue is closed while the cluster is not ready; a fault closes it before it fails what
  // was posted, so a request is either failed by the loop or refused here, never left waiting.
  const uint64_t id =
      queue_.push(std::move(request), std::move(on_event), keep_all_logits_next_.exchange(false));
  if (id == 0) fail(ErrorCode::kPeerLost, "the cluster is not ready: {}", notReadyReason());
  return id;
}

void Driver::cancel(uint64_t request_id) {
  queue_.cancel(request_id);
}

std::string Driver::lastError() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

std::vector<float> Driver::takeLogits(uint64_t id) {
  return queue_.takeLogits(id);
}

RequestTiming Driver::timing(uint64_t id) {
  return queue_.timing(id);
}

std::vector<prometheus::MetricFamily> Driver::metricFamilies() const {
  metrics_->ready.Set(ready_ ? 1 : 0);
  return metrics_->collect();
}

// ---- Loop thread ------------------------------------------------------------------------

void Driver::loop() {
  SchedulerOptions scheduling = driver_options_.scheduler;
  // A pipeline keeps one step per stage in flight: the decodes spread over that many steps.
  if (model_.topology.pipelined()) scheduling.groups = model_.topology.stages();
  scheduling.fingerprint = kvFingerprint(model_.identity, scheduling.kv_block_size);
  scheduler_ = std::make_unique<Scheduler>(scheduling);
  if (driver_options_.ranks.kv_tier) {
    tier_lookup_ = std::make_unique<RedisTierLookup>(*driver_options_.ranks.kv_tier);
    scheduler_->setKvTier(tier_lookup_.get());
  }
  requests_ = std::make_unique<RequestTracker>(model_, *scheduler_, *metrics_, queue_,
                                               driver_options_.record_timings,
                                               driver_options_.scheduler.ctx_size);
  // The gap between attempts stays below what surviving workers wait for node 0 to listen
  // again (their --connect-timeout).
  const std::chrono::milliseconds max_backoff = std::min<std::chrono::milliseconds>(
      kReformBackoffMax,
      std::chrono::milliseconds(static_cast<int64_t>(options_.connect_timeout_s * 500)));
  std::chrono::milliseconds backoff =
      std::min<std::chrono::milliseconds>(kReformBackoffMin, max_backoff);
  Clock::time_point attempt_start = Clock::now();
  while (!stop_) {
    try {
      if (!session_) {
        attempt_start = Clock::now();
        if (!formCluster()) break;
        backoff = std::min<std::chrono::milliseconds>(kReformBackoffMin, max_backoff);
      }
      if (fault_) fail(ErrorCode::kPeerLost, "a node of the cluster was lost");
      requests_->admitPosted();
      runStep();
      serveTensorRead();
    } catch (const Error& e) {
      {
        std::lock_guard lock(mu_);
        last_error_ = e.what();
        not_ready_reason_ = std::string("cluster fault: ") + e.what();
      }
      queue_.setOpen(false);
      ready_ = false;
      // Shutting down: what failed is cancelled work, not a fault (the workers are told to
      // shut down below).
      if (stop_) break;
      requests_->failAll(e.what());
      teardown(/*reset_workers=*/true);
      // The cluster never formed (a port taken, a node missing past --connect-timeout, a
      // shard that does not load): nothing to re-form; the caller reports lastError().
      if (!formed_once_) break;
      spdlog::error("[driver] cluster fault: {}", e.what());
      metrics_->faults.Increment();
      if (!driver_options_.reform_on_fault) break;
      // An attempt that failed fast (not by waiting out --connect-timeout) is not repeated
      // before `backoff` has passed since it began.
      const auto next = attempt_start + backoff;
      spdlog::info("[driver] re-forming the cluster (waiting for every node to come back){}",
                   next > Clock::now()
                       ? fmt::format(" in {:.1f} s",
                                     std::chrono::duration<double>(next - Clock::now()).count())
                       : "");
      queue_.waitStopped(next);
      backoff = std::min(backoff * 2, max_backoff);
    }
  }
  queue_.setOpen(false);
  ready_ = false;
  requests_->failAll(stop_ ? "the server is shutting down" : "the cluster failed");
  teardown(/*reset_workers=*/false);
  loop_done_ = true;
}

bool Driver::formCluster() {
  fault_ = false;
  SessionHooks hooks;
  hooks.cancel = &stop_;
  hooks.meters = &metrics_->links();
  hooks.log_formation = true;
  hooks.on_peer = [this](const mesh::PeerEvent& e) {
    if (e.kind == mesh::PeerEventKind::kConnected) return;
    if (e.kind == mesh::PeerEventKind::kLost) metrics_->nodeLost(e.peer);
    spdlog::warn("[driver] node {} lost: {}", e.peer, e.reason);
    fault_ = true;
    queue_.wake();
  };
  // Stages chosen by --split auto: every re-formation tells the nodes the stages again, so
  // that a restarted node adopts them (node/stage_rejoin.h).
  if (options_.pp_chosen && formed_once_) agreeOnChosenStages(options_, model_, &stop_, {}, {});
  auto session = std::make_unique<ClusterSession>(options_, model_, std::move(hooks));
  session->formGroup();
  session->loadRanks(driver_options_.ranks);
  // Every worker reports when its ranks are loaded, so that "ready" means ready.
  session->awaitLoaded();
  session_ = std::move(session);
  formed_once_ = true;
  // One row of logits committed now, as the ranks' batch buffers (RankSetOptions::
  // reserve_tokens): the first prompt's step does not fault the row's pages in.
  if (logits_.size() < static_cast<size_t>(model_.config.n_vocab)) {
    logits_.assign(static_cast<size_t>(model_.config.n_vocab), 0.0f);
  }
  if (session_->mesh()) watchdog_->watch(session_->mesh(), session_->ledger());
  if (session_->mesh() && driver_options_.ranks.kv_tier) {
    const collectives::Topology& topo = model_.topology;
    tier_poll_ = std::make_unique<TierCounterPoll>(
        *session_->mesh(),
        [&topo](int node) {
          return std::pair(static_cast<uint32_t>(topo.layout().firstRankOf(node)),
                           static_cast<uint32_t>(topo.layout().ranksOf(node)));
        },
        kTierPollInterval);
  }
  ready_ = true;
  queue_.setOpen(true);
  metrics_->setRanks(session_->ranks());
  {
    std::lock_guard lock(mu_);
    not_ready_reason_.clear();
  }
  spdlog::info("[cluster] ready: {} node(s) x {} rank(s){}, model {}, {} slots x {} positions",
               model_.topology.nodes(), model_.topology.ranksPerNode(),
               model_.topology.pipelined()
                   ? fmt::format(" in {} pipeline stages", model_.topology.stages())
                   : "",
               model_.name, driver_options_.scheduler.slots, driver_options_.scheduler.ctx_size);
  return true;
}

void Driver::teardown(bool reset_workers) {
  if (!session_) return;
  session_->dismissWorkers(reset_workers ? StepKind::kReset : StepKind::kShutdown, *watchdog_);
  watchdog_->watch(nullptr);
  in_flight_.clear();
  tier_poll_.reset();  // its receives are on the session's mesh
  wire_tables_ = {};   // the next session's workers start with no tables
  session_.reset();
  for (auto& s : scheduler_->drainAll()) (void)s;
}

void Driver::broadcastCommand(const StepCommand& command) {
  if (!session_->mesh()) return;
  if (command.kind == StepKind::kStep) {
    StepCommand wire = command;  // the chunks' tables as appends (node/step_command.h)
    wire_tables_.toWire(wire);
    encodeStepCommand(wire, command_bytes_);
  } else {
    encodeStepCommand(command, command_bytes_);
  }
  session_->sendToWorkers(command_bytes_);
}

void Driver::publishBlockStats() {
  const KvBlockStats b = scheduler_->blockStats();
  kv_blocks_total_ = static_cast<int>(b.total);
  kv_blocks_free_ = static_cast<int>(b.free);
  metrics_->kv_blocks_total.Set(b.total);
  metrics_->kv_blocks_free.Set(b.free);
  metrics_->kv_blocks_cached.Set(b.cached);
  const PrefixStats& p = scheduler_->prefixStats();
  auto add = [](prometheus::Counter& c, uint64_t now, uint64_t& seen) {
    if (now > seen) c.Increment(static_cast<double>(now - seen));
    seen = now;
  };
  add(metrics_->prefix_lookups, p.lookups, seen_.lookups);
  add(metrics_->prefix_hits, p.hits, seen_.hits);
  add(metrics_->prefix_cached_tokens, p.cached_tokens, seen_.cached_tokens);
  add(metrics_->kv_preemptions, p.preemptions, seen_.preemptions);
  add(metrics_->kv_evictions, b.evictions, seen_evictions_);
  add(metrics_->kv_redis_fetched, p.tier_loaded, seen_.tier_loaded);
  add(metrics_->kv_redis_fetch_failures, p.tier_failed, seen_.tier_failed);
  if (tier_poll_) {
    for (const TierReport& r : tier_poll_->poll()) metrics_->setTierReport(r);
  }
}

// Every rank stores, then loads, its shard of the step's tier blocks (node/rank_set.h); the
// loads' agreed result goes back to the scheduler before the next plan. In a pipeline split the
// command goes out after the steps in flight and before the step planned with it, and every
// node runs its commands in order: the stores copy blocks that committed steps wrote, before
// the planned step may reuse them; the loads fill blocks before the step that reads them. Only
// loads wait: for every stage's flags (node/stage_pipeline.h), so for the steps in flight.
void Driver::runTier(const PlannedStep& step) {
  if (step.stores.empty() && step.loads.empty()) return;
  StepCommand cmd;
  cmd.kind = StepKind::kKvTier;
  cmd.stores = step.stores;
  cmd.loads = step.loads;
  std::vector<bool> loaded;
  {
    StepWatchdog::Scope watched(*watchdog_);
    // Every node takes part (stage 0's in its all-reduce, a later stage's first node with its
    // flags) once it has run every command sent before.
    if (CommandLedger* ledger = session_->ledger(); ledger != nullptr) ledger->awaitAll();
    broadcastCommand(cmd);
    loaded = session_->runKvTier(cmd.stores, cmd.loads);
  }
  scheduler_->finishLoads(step, loaded);
}

PlannedStep Driver::planStep() {
  std::vector<std::unique_ptr<Sequence>> removed;
  PlannedStep step = scheduler_->plan(removed);
  for (auto& s : removed) requests_->erase(s->id);
  metrics_->running.Set(static_cast<double>(scheduler_->running()));
  metrics_->waiting.Set(static_cast<double>(scheduler_->waiting()));
  publishBlockStats();
  return step;
}

void Driver::runStep() {
  if (session_->keepsStepsInFlight()) {
    pumpPipeline();
    return;
  }
  PlannedStep step = planStep();
  runTier(step);  // before the step: it may reuse the blocks stored, and needs those loaded
  if (!step.command.seqs.empty()) runWholeStep(std::move(step));
}

void Driver::runWholeStep(PlannedStep step) {
  auto t0 = Clock::now();
  StepWatchdog::Scope watched(*watchdog_);
  markTaps(step);
  broadcastCommand(step.command);
  expandStep(step.command, batch_);
  model::TapSink sink;
  session_->runStep(batch_, logits_, step.command.taps, &sink);
  watchdog_->end();
  collectTaps(step, sink, batch_);
  takeResults(step, t0);
}

// Begins steps while the pipeline has room and there is work that does not wait on a step in
// flight, then finishes the oldest one.
void Driver::pumpPipeline() {
  const size_t limit = static_cast<size_t>(session_->stepsInFlightLimit());
  while (in_flight_.size() < limit) {
    PlannedStep step = planStep();
    runTier(step);  // as runStep(): before the step, also when the plan holds none
    if (step.command.seqs.empty()) break;
    beginStep(std::move(step));
  }
  if (!in_flight_.empty()) finishStep();
}

void Driver::beginStep(PlannedStep step) {
  InFlightStep f;
  f.t0 = Clock::now();
  CommandLedger* ledger = session_->ledger();
  {
    StepWatchdog::Scope watched(*watchdog_);
    if (ledger != nullptr) ledger->awaitAll();  // stage 0's other nodes take part at once
    markTaps(step);
    broadcastCommand(step.command);
    if (ledger != nullptr) f.awaited = ledger->snapshot();
    expandStep(step.command, batch_);
    const uint64_t overlapped = session_->overlappedSteps();
    session_->beginStep(batch_, step.command.taps);
    if (session_->overlappedSteps() != overlapped) metrics_->overlapped_steps.Increment();
  }
  f.batch = batch_;
  f.step = std::move(step);
  in_flight_.push_back(std::move(f));
}

void Driver::finishStep() {
  InFlightStep f = std::move(in_flight_.front());
  in_flight_.pop_front();
  model::TapSink taps;  // the step's, from every stage
  CommandLedger* ledger = session_->ledger();
  {
    StepWatchdog::Scope watched(*watchdog_);
    if (ledger != nullptr) {
      // The step's logits need every stage to have taken up its command; the nodes of stage 0
      // also the retire command finishStep() sends them.
      for (int k = 0; k < model_.topology.nodesPerStage(); ++k) {
        f.awaited[static_cast<size_t>(k)] = CommandLedger::kAll;
      }
      ledger->awaitUpTo(f.awaited);
    }
    session_->finishStep(logits_, 0, &taps);
  }
  if (ledger != nullptr) ledger->awaitAll();
  collectTaps(f.step, taps, f.batch);
  takeResults(f.step, f.t0);
}

// After a step's logits are in: commits it, samples its sequences' tokens, reports them.
void Driver::takeResults(const PlannedStep& step, Clock::time_point t0) {
  scheduler_->commit(step);
  metrics_->steps.Increment();
  metrics_->step_ms.Set(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  metrics_->addExpertLoad(session_->expertLoad());

  // Rows come in batch order: walk the chunks the same way.
  const int64_t vocab = model_.config.n_vocab;
  size_t row = 0;
  for (size_t i = 0; i < step.command.seqs.size(); ++i) {
    const SeqChunk& c = step.command.seqs[i];
    ActiveRequest& a = requests_->at(step.participants[i]->id);
    if (!a.started) {
      a.started = true;
      a.first_step = t0;
    }
    if (a.seq->n_cached <= a.seq->n_prompt) {
      metrics_->prompt_tokens.Increment(static_cast<double>(c.tokens.size()));
    }
    const size_t rows = logitRows(c);
    if (a.all_logits) {
      a.logits.insert(a.logits.end(), logits_.begin() + static_cast<std::ptrdiff_t>(row * vocab),
                      logits_.begin() + static_cast<std::ptrdiff_t>((row + rows) * vocab));
    }
    if ((c.flags & kLogitsLast) && !a.seq->finished && !a.seq->cancelled) {
      if (a.feeding_last) {
        requests_->finish(a, "length");
      } else {
        requests_->sample(a, logits_.data() + (row + rows - 1) * vocab);
      }
    }
    row += rows;
  }
}

}  // namespace tpnode::node
