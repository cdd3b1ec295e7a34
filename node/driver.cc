#include "node/driver.h"

#include <algorithm>
#include <chrono>
#include <random>

#include <spdlog/spdlog.h>

#include "common/error.h"
#include "model/chat_template.h"
#include "node/collective_setup.h"
#include "node/driver_state.h"
#include "node/mesh_setup.h"
#include "node/step_command.h"

namespace tpnode::node {

using Clock = std::chrono::steady_clock;

namespace {

// Between two attempts to re-form the cluster after a fault (doubling, reset once it forms).
constexpr auto kReformBackoffMin = std::chrono::seconds(2);
constexpr auto kReformBackoffMax = std::chrono::seconds(30);

model::SamplingParams samplingParams(const GenerationRequest& r) {
  const SamplingOptions& so = r.sampling;
  model::SamplingParams p;
  p.temperature = static_cast<float>(so.temperature);
  p.top_k = so.top_k;
  p.top_p = static_cast<float>(so.top_p);
  p.min_p = static_cast<float>(so.min_p);
  p.repeat_penalty = static_cast<float>(so.repeat_penalty);
  p.presence_penalty = static_cast<float>(so.presence_penalty);
  p.frequency_penalty = static_cast<float>(so.frequency_penalty);
  p.seed = so.seed ? *so.seed : std::random_device{}();
  p.logprobs = r.logprobs || r.top_logprobs > 0;
  p.top_logprobs = r.top_logprobs;
  return p;
}

}  // namespace

Driver::Driver(const Options& options, const LoadedModel& model, DriverOptions driver_options)
    : options_(options),
      model_(model),
      driver_options_(driver_options),
      metrics_(std::make_unique<DriverMetrics>(static_cast<int>(options.tp_layout.size()),
                                               options.node_id)) {
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
  {
    std::lock_guard lock(mu_);  // a loop waiting on wake_ sees it
    stop_ = true;
  }
  wake_.notify_all();
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
  // A file without tokenizer.chat_template gets its architecture's format (gemma), else
  // chatml, which is what llama.cpp's server falls back to.
  std::string_view text = model_.chat_template;
  if (text.empty()) text = model_.config.arch.rfind("gemma", 0) == 0 ? "gemma" : "chatml";
  model::ChatTemplate t = model::detectChatTemplate(text);
  std::vector<model::ChatMsg> msgs;
  for (const auto& m : messages) msgs.push_back({m.role, m.content});
  return model::renderChat(t, msgs, /*add_assistant=*/true);
}

uint64_t Driver::submit(GenerationRequest request,
                        std::function<void(const TokenEvent&)> on_event) {
  const int ctx = driver_options_.scheduler.ctx_size;
  if (request.prompt_ids.empty()) fail(ErrorCode::kInvalidArgument, "the prompt has no tokens");
  if (static_cast<int>(request.prompt_ids.size()) >= ctx) {
    fail(ErrorCode::kInvalidArgument,
         "the prompt has {} tokens but the context is {} per slot; shorten it or raise "
         "--ctx-size",
         request.prompt_ids.size(), ctx);
  }
  for (int32_t id : request.prompt_ids) {
    if (id < 0 || id >= model_.config.n_vocab) {
      fail(ErrorCode::kInvalidArgument, "prompt token id {} is outside the vocabulary 0..{}", id,
           model_.config.n_vocab - 1);
    }
  }
  if (request.max_tokens < 0) {
    fail(ErrorCode::kInvalidArgument, "max_tokens {} must be >= 0", request.max_tokens);
  }
  for (const model::TapSpec& t : request.taps) {
    if (t.point != model::TapPoint::kLogits && (t.layer < 0 || t.layer >= model_.config.n_layer)) {
      fail(ErrorCode::kInvalidArgument, "tap layer {} is outside the model's layers 0..{}", t.layer,
           model_.config.n_layer - 1);
    }
  }
  // Validate sampling parameters now, on the caller's thread (the error names the field).
  model::checkSamplingParams(samplingParams(request));
  if (!ready_) {
    fail(ErrorCode::kPeerLost, "the cluster is not ready: {}", notReadyReason());
  }
  std::lock_guard lock(mu_);
  uint64_t id = next_id_++;
  incoming_.push_back(
      {id, std::move(request), std::move(on_event), keep_all_logits_next_.exchange(false)});
  wake_.notify_all();
  return id;
}

void Driver::cancel(uint64_t request_id) {
  std::lock_guard lock(mu_);
  cancels_.push_back(request_id);
  wake_.notify_all();
}

std::string Driver::lastError() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

std::vector<float> Driver::takeLogits(uint64_t id) {
  std::lock_guard lock(mu_);
  auto it = kept_logits_.find(id);
  if (it == kept_logits_.end()) return {};
  std::vector<float> out = std::move(it->second);
  kept_logits_.erase(it);
  return out;
}

RequestTiming Driver::timing(uint64_t id) {
  std::lock_guard lock(mu_);
  return timings_[id];
}

std::vector<prometheus::MetricFamily> Driver::metricFamilies() const {
  metrics_->ready.Set(ready_ ? 1 : 0);
  return metrics_->collect();
}

// ---- Loop thread ------------------------------------------------------------------------

void Driver::loop() {
  scheduler_ = std::make_unique<Scheduler>(driver_options_.scheduler);
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
      admitIncoming();
      runStep();
      serveTensorRead();
    } catch (const Error& e) {
      {
        std::lock_guard lock(mu_);
        last_error_ = e.what();
        not_ready_reason_ = std::string("cluster fault: ") + e.what();
      }
      ready_ = false;
      // Shutting down: what failed is cancelled work, not a fault (the workers are told to
      // shut down below).
      if (stop_) break;
      failAll(e.what());
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
      std::unique_lock lock(mu_);
      wake_.wait_until(lock, next, [this] { return stop_.load(); });
      backoff = std::min(backoff * 2, max_backoff);
    }
  }
  ready_ = false;
  failAll(stop_ ? "the server is shutting down" : "the cluster failed");
  teardown(/*reset_workers=*/false);
  loop_done_ = true;
}

bool Driver::formCluster() {
  fault_ = false;
  auto session = std::make_unique<Session>();
  const int nodes = static_cast<int>(options_.tp_layout.size());
  if (nodes > 1) {
    spdlog::info("[driver] forming the mesh of {} nodes", nodes);
    mesh::MeshOptions mo = makeMeshOptions(options_, model_.identity);
    mo.cancel = &stop_;
    session->mesh = mesh::Mesh::connect(mo);
    // The collectives' traffic is counted per link; control messages go around it.
    session->metered = std::make_unique<mesh::MeteredMesh>(*session->mesh, metrics_->links());
  }
  auto coll = collectiveOptionsFor(options_);
  spdlog::info("[collectives] {}", describeTransports(options_, coll));
  session->group = collectives::NodeGroup::create(
      session->metered.get(), options_.tp, coll, [this](const mesh::PeerEvent& e) {
        if (e.kind == mesh::PeerEventKind::kConnected) return;
        spdlog::warn("[driver] node {} lost: {}", e.peer, e.reason);
        fault_ = true;
        wake_.notify_all();
      });
  session->ranks = std::make_unique<RankSet>(*model_.file, model_.config, model_.plan,
                                             session->group, driver_options_.ranks);
  if (session->mesh) {
    // Every worker reports when its ranks are loaded, so that "ready" means ready.
    std::byte ack[1];
    for (int p = 1; p < nodes; ++p) session->mesh->recv(p, kTagControlAck, ack);
  }
  session_ = std::move(session);
  formed_once_ = true;
  if (session_->mesh) watchdog_->watch(session_->mesh.get());
  ready_ = true;
  metrics_->setRanks(*session_->ranks);
  {
    std::lock_guard lock(mu_);
    not_ready_reason_.clear();
  }
  spdlog::info("[cluster] ready: {} node(s) x {} rank(s), model {}, {} slots x {} positions", nodes,
               options_.tp, model_.name, driver_options_.scheduler.slots,
               driver_options_.scheduler.ctx_size);
  return true;
}

void Driver::teardown(bool reset_workers) {
  if (!session_) return;
  if (session_->mesh) {
    StepCommand cmd;
    cmd.kind = reset_workers ? StepKind::kReset : StepKind::kShutdown;
    encodeStepCommand(cmd, command_bytes_);
    std::byte ack[1];
    for (int p = 1; p < session_->mesh->nodeCount(); ++p) {
      StepWatchdog::Scope bounded(*watchdog_);  // a peer that does not acknowledge is lost
      try {
        if (!session_->mesh->peerAlive(p)) continue;
        session_->mesh->send(p, kTagControl, command_bytes_);
        session_->mesh->recv(p, kTagControlAck, ack);
      } catch (const Error& e) {
        spdlog::warn("[driver] node {} did not acknowledge {}: {}", p,
                     reset_workers ? "the reset" : "the shutdown", e.what());
      }
    }
  }
  watchdog_->watch(nullptr);
  session_->ranks.reset();
  session_->group.reset();
  session_.reset();
  for (auto& s : scheduler_->drainAll()) (void)s;
}

void Driver::failAll(const std::string& reason) {
  for (auto& [id, a] : active_) {
    if (a->final_sent) continue;
    a->final_sent = true;
    TokenEvent e;
    e.finished = true;
    e.finish_reason = "error";
    e.error = reason;
    e.prompt_tokens = static_cast<int>(a->request.prompt_ids.size());
    e.completion_tokens = static_cast<int>(a->sampled);
    metrics_->requests_failed.Increment();
    a->on_event(e);
  }
  active_.clear();
  scheduler_->drainAll();
  std::deque<Incoming> pending;
  std::deque<PendingRead> reads;
  {
    std::lock_guard lock(mu_);
    pending.swap(incoming_);
    reads.swap(reads_);
  }
  for (auto& r : reads) {
    TensorReadResult res;
    res.error_code = static_cast<int>(ErrorCode::kPeerLost);
    res.error = reason;
    r.done(std::move(res));
  }
  for (auto& in : pending) {
    TokenEvent e;
    e.finished = true;
    e.finish_reason = "error";
    e.error = reason;
    metrics_->requests_failed.Increment();
    in.on_event(e);
  }
}

void Driver::admitIncoming() {
  std::deque<Incoming> pending;
  std::vector<uint64_t> cancels;
  {
    std::unique_lock lock(mu_);
    if (incoming_.empty() && cancels_.empty() && active_.empty() && reads_.empty()) {
      wake_.wait_for(lock, std::chrono::milliseconds(200));
    }
    pending.swap(incoming_);
    cancels.swap(cancels_);
  }
  for (auto& in : pending) {
    auto a = std::make_unique<Active>();
    a->id = in.id;
    a->on_event = std::move(in.on_event);
    a->all_logits = in.all_logits;
    model::SamplingParams p = samplingParams(in.request);
    a->sampler = std::make_unique<model::Sampler>(p, static_cast<int32_t>(model_.config.n_vocab));
    a->sampler->acceptPrompt(in.request.prompt_ids);
    a->request = std::move(in.request);
    for (const model::TapSpec& spec : a->request.taps) {
      TapResult r;
      r.spec = spec;
      const bool logits = spec.point == model::TapPoint::kLogits;
      r.cols = logits ? model_.config.n_vocab : model_.config.n_embd;
      (logits ? a->logits_tap : a->state_taps) = true;
      a->taps.push_back(std::move(r));
    }
    if (!a->taps.empty()) metrics_->tap_requests.Increment();
    if (a->request.max_tokens == 0 && !a->all_logits &&
        a->taps.empty()) {  // nothing to evaluate: report at once
      TokenEvent e;
      e.finished = true;
      e.finish_reason = "length";
      e.prompt_tokens = static_cast<int>(a->request.prompt_ids.size());
      a->on_event(e);
      continue;
    }
    a->seq = scheduler_->add(a->id, a->request.prompt_ids, a->request.max_tokens);
    a->seq->all_logits = a->all_logits || a->logits_tap;
    a->feeding_last = a->request.max_tokens == 0;  // -n 0: rows of the prompt only
    active_[a->id] = std::move(a);
  }
  for (uint64_t id : cancels) {
    auto it = active_.find(id);
    if (it == active_.end()) continue;
    scheduler_->cancel(id);
    finishSequence(*it->second, "cancelled");
  }
}

void Driver::finishSequence(Active& a, const std::string& reason) {
  if (a.seq != nullptr) a.seq->finished = true;
  if (a.final_sent) return;
  a.final_sent = true;
  TokenEvent e;
  e.finished = true;
  e.finish_reason = reason;
  e.prompt_tokens = static_cast<int>(a.request.prompt_ids.size());
  e.completion_tokens = static_cast<int>(a.sampled);
  e.taps = std::move(a.taps);
  if (driver_options_.record_timings || a.all_logits) {
    std::lock_guard lock(mu_);
    RequestTiming& t = timings_[a.id];
    // Without a sampled token (-n 0) the prefill ends now, with the prompt's last row.
    const Clock::time_point prefill_end = a.sampled > 0 ? a.first_token : Clock::now();
    t.prefill_seconds =
        a.started ? std::chrono::duration<double>(prefill_end - a.first_step).count() : 0.0;
    t.decode_seconds =
        a.sampled > 0 ? std::chrono::duration<double>(a.last_token - a.first_token).count() : 0.0;
    t.decode_steps = std::max<int64_t>(0, a.sampled - 1);
    if (a.all_logits) kept_logits_[a.id] = std::move(a.logits);
  }
  a.on_event(e);
}

void Driver::sampleInto(Active& a, const float* row) {
  const int64_t vocab = model_.config.n_vocab;
  const model::TokenId id = a.sampler->sample(std::span<const float>(row, vocab));
  a.last_token = Clock::now();
  if (a.sampled == 0) a.first_token = a.last_token;
  ++a.sampled;
  metrics_->generated_tokens.Increment();
  const bool eog = model_.tokenizer->isEog(id) && !a.request.ignore_eos;
  if (!eog) {
    a.seq->tokens.push_back(id);
    TokenEvent e;
    e.id = id;
    e.text = model_.tokenizer->tokenToPiece(id, /*special=*/false);
    e.logprob = a.sampler->chosenLogprob();
    if (a.sampled == 1) e.taps = std::move(a.taps);  // the prompt is done: taps are complete
    for (const auto& t : a.sampler->topLogprobs()) {
      e.top.push_back({t.id, model_.tokenizer->tokenToPiece(t.id, false), t.logprob});
    }
    a.on_event(e);
  }
  const bool ctx_full =
      static_cast<int>(a.seq->tokens.size()) >= driver_options_.scheduler.ctx_size;
  if (eog) {
    finishSequence(a, "stop");
  } else if (a.sampled >= a.request.max_tokens && a.all_logits && !ctx_full) {
    a.feeding_last = true;  // one more step gives the row after the last generated token
  } else if (a.sampled >= a.request.max_tokens || ctx_full) {
    finishSequence(a, "length");
  }
}

void Driver::broadcastCommand(const StepCommand& command) {
  if (!session_->mesh) return;
  encodeStepCommand(command, command_bytes_);
  for (int p = 1; p < session_->mesh->nodeCount(); ++p) {
    session_->mesh->send(p, kTagControl, command_bytes_);
  }
}

void Driver::runStep() {
  std::vector<std::unique_ptr<Sequence>> removed;
  PlannedStep step = scheduler_->plan(removed);
  for (auto& s : removed) active_.erase(s->id);
  metrics_->running.Set(static_cast<double>(scheduler_->running()));
  metrics_->waiting.Set(static_cast<double>(scheduler_->waiting()));
  if (step.command.seqs.empty()) return;

  auto t0 = Clock::now();
  StepWatchdog::Scope watched(*watchdog_);
  broadcastCommand(step.command);
  batch_.clear();
  for (const SeqChunk& c : step.command.seqs) {
    for (size_t j = 0; j < c.tokens.size(); ++j) {
      bool last = j + 1 == c.tokens.size();
      bool want = (c.flags & kLogitsAll) || ((c.flags & kLogitsLast) && last);
      batch_.push_back(
          {c.tokens[j], static_cast<int32_t>(c.start_pos + j), static_cast<int32_t>(c.slot), want});
    }
  }
  model::TapSink sink;
  markTaps(step, sink);
  session_->ranks->run(batch_, logits_, sink.specs.empty() ? nullptr : &sink);
  watchdog_->end();
  collectTaps(step, sink);
  scheduler_->commit(step);
  metrics_->steps.Increment();
  metrics_->step_ms.Set(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());

  // Rows come in batch order: walk the chunks the same way.
  const int64_t vocab = model_.config.n_vocab;
  size_t row = 0;
  for (size_t i = 0; i < step.command.seqs.size(); ++i) {
    const SeqChunk& c = step.command.seqs[i];
    Active& a = *active_.at(step.participants[i]->id);
    if (!a.started) {
      a.started = true;
      a.first_step = t0;
    }
    if (a.seq->n_cached <= a.seq->n_prompt) {
      metrics_->prompt_tokens.Increment(static_cast<double>(c.tokens.size()));
    }
    size_t rows = (c.flags & kLogitsAll) ? c.tokens.size() : ((c.flags & kLogitsLast) ? 1 : 0);
    if (a.all_logits) {
      a.logits.insert(a.logits.end(), logits_.begin() + static_cast<std::ptrdiff_t>(row * vocab),
                      logits_.begin() + static_cast<std::ptrdiff_t>((row + rows) * vocab));
    }
    if ((c.flags & kLogitsLast) && !a.seq->finished && !a.seq->cancelled) {
      if (a.feeding_last) {
        finishSequence(a, "length");
      } else {
        sampleInto(a, logits_.data() + (row + rows - 1) * vocab);
      }
    }
    row += rows;
  }
}

}  // namespace tpnode::node
