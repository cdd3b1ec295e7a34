#include "node/request_queue.h"

namespace tpnode::node {

uint64_t RequestQueue::push(GenerationRequest request,
                            std::function<void(const TokenEvent&)> on_event, bool all_logits) {
  std::lock_guard lock(mu_);
  if (!open_) return 0;
  uint64_t id = next_id_++;
  incoming_.push_back({id, std::move(request), std::move(on_event), all_logits});
  wake_.notify_all();
  return id;
}

void RequestQueue::cancel(uint64_t id) {
  std::lock_guard lock(mu_);
  cancels_.push_back(id);
  wake_.notify_all();
}

bool RequestQueue::pushRead(PendingRead read) {
  std::lock_guard lock(mu_);
  if (!open_) return false;
  reads_.push_back(std::move(read));
  wake_.notify_all();
  return true;
}

void RequestQueue::setOpen(bool open) {
  std::lock_guard lock(mu_);
  open_ = open;
}

void RequestQueue::stop() {
  {
    std::lock_guard lock(mu_);  // a loop waiting on wake_ sees it
    stopped_ = true;
  }
  wake_.notify_all();
}

void RequestQueue::take(bool busy, std::chrono::milliseconds idle,
                        std::deque<IncomingRequest>& requests, std::vector<uint64_t>& cancels) {
  std::unique_lock lock(mu_);
  if (incoming_.empty() && cancels_.empty() && !busy && reads_.empty() && !stopped_) {
    wake_.wait_for(lock, idle);
  }
  requests.swap(incoming_);
  cancels.swap(cancels_);
}

std::optional<PendingRead> RequestQueue::takeRead() {
  std::lock_guard lock(mu_);
  if (reads_.empty()) return std::nullopt;
  PendingRead read = std::move(reads_.front());
  reads_.pop_front();
  return read;
}

void RequestQueue::drain(std::deque<IncomingRequest>& requests, std::deque<PendingRead>& reads) {
  std::lock_guard lock(mu_);
  requests.swap(incoming_);
  reads.swap(reads_);
}

void RequestQueue::waitStopped(Clock::time_point deadline) {
  std::unique_lock lock(mu_);
  wake_.wait_until(lock, deadline, [this] { return stopped_; });
}

void RequestQueue::keep(uint64_t id, const RequestTiming& timing,
                        std::optional<std::vector<float>> logits) {
  std::lock_guard lock(mu_);
  timings_[id] = timing;
  if (logits) kept_logits_[id] = std::move(*logits);
}

std::vector<float> RequestQueue::takeLogits(uint64_t id) {
  std::lock_guard lock(mu_);
  auto it = kept_logits_.find(id);
  if (it == kept_logits_.end()) return {};
  std::vector<float> out = std::move(it->second);
  kept_logits_.erase(it);
  return out;
}

RequestTiming RequestQueue::timing(uint64_t id) {
  std::lock_guard lock(mu_);
  return timings_[id];
}

}  // namespace tpnode::node
