// RequestTracker: the requests node 0 is running, from admission to their one final event.
// It admits what the RequestQueue hands over (a sampler per request, its taps, a sequence in
// the Scheduler), samples each request's next token from its logits row and reports it, ends
// requests (stop, length, cancelled) and fails them all when the cluster faults.
//
// Contract
// - Owned by the Driver and used by its loop thread only; the events go out on that thread
//   (Engine contract: on_event never blocks).
// - Every admitted request gets exactly one event with finished == true: from finish(), or
//   from failAll() for whatever is still running or queued.
// - The model, the scheduler, the metrics and the queue outlive the tracker.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/sampling.h"
#include "node/driver_metrics.h"
#include "node/engine.h"
#include "node/loaded_model.h"
#include "node/request_queue.h"
#include "node/scheduler.h"

namespace tpnode::node {

struct ActiveRequest {
  uint64_t id = 0;
  GenerationRequest request;
  std::function<void(const TokenEvent&)> on_event;
  std::unique_ptr<model::Sampler> sampler;
  Sequence* seq = nullptr;  // owned by the scheduler
  bool all_logits = false;
  std::vector<float> logits;  // kept rows when all_logits
  std::chrono::steady_clock::time_point first_step{}, first_token{}, last_token{};
  // The process's CPU seconds (every thread) at admission, at the first and at the last sampled
  // token: the prefill's and the decode's CPU time, which a machine shared with other work
  // inflates less than their wall time.
  double admit_cpu = 0, first_token_cpu = 0, last_token_cpu = 0;
  bool started = false;
  bool feeding_last = false;  // all_logits: the last token is fed for its row, not sampled
  bool final_sent = false;    // the one event with finished == true has gone out
  int64_t sampled = 0;
  std::vector<TapResult> taps;  // one per requested tap, filled during the prompt
  bool state_taps = false;      // a residual / attn_out / mlp_out tap
  bool logits_tap = false;
};

class RequestTracker {
 public:
  // `record_timings`: keep every request's timing in the queue (the CLI's --prompt); requests
  // that keep all logits always do. `ctx_size`: positions per slot.
  RequestTracker(const LoadedModel& model, Scheduler& scheduler, DriverMetrics& metrics,
                 RequestQueue& queue, bool record_timings, int ctx_size);

  // Takes what was posted (waiting a little when there is nothing to do), admits the requests
  // and applies the cancels.
  void admitPosted();
  // Reports `reason` (finish_reason "error") to every running and posted request and tensor
  // read, and empties the scheduler.
  void failAll(const std::string& reason);
  // Sends a's final event (once) with `reason`.
  void finish(ActiveRequest& a, const std::string& reason);
  // Samples a's next token from `row` (n_vocab floats), reports it and ends a when done.
  void sample(ActiveRequest& a, const float* row);

  ActiveRequest& at(uint64_t id) { return *active_.at(id); }
  const ActiveRequest& at(uint64_t id) const { return *active_.at(id); }
  void erase(uint64_t id) { active_.erase(id); }
  bool empty() const { return active_.empty(); }

 private:
  void admit(IncomingRequest& in);

  const LoadedModel& model_;
  Scheduler& scheduler_;
  DriverMetrics& metrics_;
  RequestQueue& queue_;
  const bool record_timings_;
  const int ctx_size_;
  std::map<uint64_t, std::unique_ptr<ActiveRequest>> active_;
};

}  // namespace tpnode::node
