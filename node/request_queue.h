// RequestQueue: node 0's hand-off between the threads that ask (HTTP threads, the CLI) and the
// Driver's loop thread that runs the cluster, as in llama.cpp's server: callers post
// generation requests, cancels and tensor reads; the loop thread takes them between steps.
// It also keeps what callers fetch after a request finished (kept logits rows, timings).
//
// Contract
// - push(), cancel(), pushRead(), wake(), takeLogits(), timing() and stop(): any thread.
// - take(), takeRead(), drain(), waitStopped() and keep(): the loop thread only.
// - Ids are unique and increasing from 1. A posted request always reaches the loop thread
//   (take() or drain()), so its on_event is called exactly as the Engine contract says.
// - The queue starts closed: push() and pushRead() refuse (return 0 / false, nothing kept)
//   until the loop thread opens it (the cluster formed) and again once it closes it (a fault,
//   before it drains). Closing and draining are then one step for the callers: nothing posted
//   after the drain waits for a cluster that is not there.
// - stop() wakes every wait at once and for good (the Driver is shutting down).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "node/engine.h"

namespace tpnode::node {

// Timing of one finished request, for the CLI's tokens/s.
struct RequestTiming {
  double prefill_seconds = 0;  // from its first step to its first sampled token
  // The process's CPU seconds (all threads, idle spinning of a pool's workers included) from
  // its admission to its first sampled token.
  double prefill_cpu_seconds = 0;
  double decode_seconds = 0;      // from its first to its last sampled token
  double decode_cpu_seconds = 0;  // the process's CPU seconds over the same span
  int64_t decode_steps = 0;
};

struct IncomingRequest {
  uint64_t id = 0;
  GenerationRequest request;
  std::function<void(const TokenEvent&)> on_event;
  bool all_logits = false;  // keep a logits row for every position (--dump-logits)
};

struct PendingRead {
  size_t index = 0;  // in the shard plan
  std::function<void(TensorReadResult)> done;
};

class RequestQueue {
 public:
  using Clock = std::chrono::steady_clock;

  // The request's id, or 0 when the queue is closed (the request is dropped unanswered: the
  // caller refuses it).
  uint64_t push(GenerationRequest request, std::function<void(const TokenEvent&)> on_event,
                bool all_logits);
  void cancel(uint64_t id);
  // False when the queue is closed (the read is dropped; `done` is not called).
  bool pushRead(PendingRead read);
  // Loop thread: open once the cluster serves, closed on a fault (before drain()).
  void setOpen(bool open);
  // Wakes the loop thread if it is waiting in take() (e.g. a peer was lost).
  void wake() { wake_.notify_all(); }
  void stop();

  // Takes the posted requests and cancels; when nothing at all is waiting and `busy` is false
  // (no request running), first waits up to `idle` for something to arrive.
  void take(bool busy, std::chrono::milliseconds idle, std::deque<IncomingRequest>& requests,
            std::vector<uint64_t>& cancels);
  // The oldest posted tensor read, if any.
  std::optional<PendingRead> takeRead();
  // Everything still posted (requests and reads), to be failed.
  void drain(std::deque<IncomingRequest>& requests, std::deque<PendingRead>& reads);
  // Waits until `deadline` or stop().
  void waitStopped(Clock::time_point deadline);

  // Results of finished request `id`, fetched by the caller afterwards.
  void keep(uint64_t id, const RequestTiming& timing, std::optional<std::vector<float>> logits);
  std::vector<float> takeLogits(uint64_t id);  // moved out; empty when none
  RequestTiming timing(uint64_t id);

 private:
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopped_ = false;                                // GUARDED_BY(mu_)
  bool open_ = false;                                   // GUARDED_BY(mu_)
  uint64_t next_id_ = 1;                                // GUARDED_BY(mu_)
  std::deque<IncomingRequest> incoming_;                // GUARDED_BY(mu_)
  std::vector<uint64_t> cancels_;                       // GUARDED_BY(mu_)
  std::deque<PendingRead> reads_;                       // GUARDED_BY(mu_)
  std::map<uint64_t, std::vector<float>> kept_logits_;  // GUARDED_BY(mu_)
  std::map<uint64_t, RequestTiming> timings_;           // GUARDED_BY(mu_)
};

}  // namespace tpnode::node
