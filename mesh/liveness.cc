#include "mesh/liveness.h"

namespace tpnode::mesh {

Liveness::Liveness(std::vector<Link*> links, std::chrono::milliseconds tick)
    : links_(std::move(links)), tick_(tick), thread_([this] { loop(); }) {}

void Liveness::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Liveness::loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    auto now = Clock::now();
    for (Link* link : links_) link->service(now);
    lock.lock();
    cv_.wait_for(lock, tick_, [this] { return stop_; });
  }
}

}  // namespace tpnode::mesh
