#include "node/request_tracker.h"

#include <time.h>

#include <algorithm>
#include <deque>

#include "common/error.h"
#include "node/request_checks.h"

namespace tpnode::node {

using Clock = std::chrono::steady_clock;

namespace {

double processCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

RequestTracker::RequestTracker(const LoadedModel& model, Scheduler& scheduler,
                               DriverMetrics& metrics, RequestQueue& queue, bool record_timings,
                               int ctx_size)
    : model_(model),
      scheduler_(scheduler),
      metrics_(metrics),
      queue_(queue),
      record_timings_(record_timings),
      ctx_size_(ctx_size) {}

void RequestTracker::admitPosted() {
  std::deque<IncomingRequest> pending;
  std::vector<uint64_t> cancels;
  queue_.take(!active_.empty(), std::chrono::milliseconds(200), pending, cancels);
  for (auto& in : pending) admit(in);
  for (uint64_t id : cancels) {
    auto it = active_.find(id);
    if (it == active_.end()) continue;
    scheduler_.cancel(id);
    finish(*it->second, "cancelled");
  }
}

void RequestTracker::admit(IncomingRequest& in) {
  auto a = std::make_unique<ActiveRequest>();
  if (record_timings_) a->admit_cpu = processCpuSeconds();
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
  if (!a->taps.empty()) metrics_.tap_requests.Increment();
  if (a->request.max_tokens == 0 && !a->all_logits &&
      a->taps.empty()) {  // nothing to evaluate: report at once
    TokenEvent e;
    e.finished = true;
    e.finish_reason = "length";
    e.prompt_tokens = static_cast<int>(a->request.prompt_ids.size());
    a->on_event(e);
    return;
  }
  a->seq = scheduler_.add(a->id, a->request.prompt_ids, a->request.max_tokens);
  a->seq->all_logits = a->all_logits || a->logits_tap;
  a->feeding_last = a->request.max_tokens == 0;  // -n 0: rows of the prompt only
  active_[a->id] = std::move(a);
}

void RequestTracker::failAll(const std::string& reason) {
  for (auto& [id, a] : active_) {
    if (a->final_sent) continue;
    a->final_sent = true;
    TokenEvent e;
    e.finished = true;
    e.finish_reason = "error";
    e.error = reason;
    e.prompt_tokens = static_cast<int>(a->request.prompt_ids.size());
    e.completion_tokens = static_cast<int>(a->sampled);
    if (a->seq != nullptr) e.cached_tokens = static_cast<int>(a->seq->cached_prompt);
    metrics_.requests_failed.Increment();
    a->on_event(e);
  }
  active_.clear();
  scheduler_.drainAll();
  std::deque<IncomingRequest> pending;
  std::deque<PendingRead> reads;
  queue_.drain(pending, reads);
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
    metrics_.requests_failed.Increment();
    in.on_event(e);
  }
}

void RequestTracker::finish(ActiveRequest& a, const std::string& reason) {
  if (a.seq != nullptr) a.seq->finished = true;
  if (a.final_sent) return;
  a.final_sent = true;
  TokenEvent e;
  e.finished = true;
  e.finish_reason = reason;
  e.prompt_tokens = static_cast<int>(a.request.prompt_ids.size());
  e.completion_tokens = static_cast<int>(a.sampled);
  if (a.seq != nullptr) e.cached_tokens = static_cast<int>(a.seq->cached_prompt);
  e.taps = std::move(a.taps);
  if (record_timings_ || a.all_logits) {
    RequestTiming t;
    // Without a sampled token (-n 0) the prefill ends now, with the prompt's last row.
    const Clock::time_point prefill_end = a.sampled > 0 ? a.first_token : Clock::now();
    t.prefill_seconds =
        a.started ? std::chrono::duration<double>(prefill_end - a.first_step).count() : 0.0;
    t.decode_seconds =
        a.sampled > 0 ? std::chrono::duration<double>(a.last_token - a.first_token).count() : 0.0;
    if (record_timings_) {  // CPU clocks are read for the CLI's figures only
      t.prefill_cpu_seconds =
          a.started ? (a.sampled > 0 ? a.first_token_cpu : processCpuSeconds()) - a.admit_cpu : 0;
      t.decode_cpu_seconds = a.sampled > 0 ? a.last_token_cpu - a.first_token_cpu : 0.0;
    }
    t.decode_steps = std::max<int64_t>(0, a.sampled - 1);
    std::optional<std::vector<float>> logits;
    if (a.all_logits) logits = std::move(a.logits);
    queue_.keep(a.id, t, std::move(logits));
  }
  a.on_event(e);
}

void RequestTracker::sample(ActiveRequest& a, const float* row) {
  const int64_t vocab = model_.config.n_vocab;
  const model::TokenId id = a.sampler->sample(std::span<const float>(row, vocab));
  a.last_token = Clock::now();
  if (record_timings_) a.last_token_cpu = processCpuSeconds();
  if (a.sampled == 0) {
    a.first_token = a.last_token;
    a.first_token_cpu = a.last_token_cpu;
  }
  ++a.sampled;
  metrics_.generated_tokens.Increment();
  const bool eog = model_.tokenizer->isEog(id) && !a.request.ignore_eos;
  if (!eog) {
    a.seq->tokens.push_back(id);
    TokenEvent e;
    e.id = id;
    e.text = model_.tokenizer->tokenToPiece(id, /*special=*/false);
    e.logprob = a.sampler->chosenLogprob();
    e.cached_tokens = static_cast<int>(a.seq->cached_prompt);
    if (a.sampled == 1) e.taps = std::move(a.taps);  // the prompt is done: taps are complete
    for (const auto& t : a.sampler->topLogprobs()) {
      e.top.push_back({t.id, model_.tokenizer->tokenToPiece(t.id, false), t.logprob});
    }
    a.on_event(e);
  }
  const bool ctx_full = static_cast<int>(a.seq->tokens.size()) >= ctx_size_;
  if (eog) {
    finish(a, "stop");
  } else if (a.sampled >= a.request.max_tokens && a.all_logits && !ctx_full) {
    a.feeding_last = true;  // one more step gives the row after the last generated token
  } else if (a.sampled >= a.request.max_tokens || ctx_full) {
    finish(a, "length");
  }
}

}  // namespace tpnode::node
