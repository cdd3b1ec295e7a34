#include "mesh/liveness.h"

namespace tpnode::mesh {

Liveness::Liveness(std::chrono::milliseconds tick) : tick_(tick), thread_([this] { loop(); }) {}

void Liveness::add(Link* link) {
  std::lock_guard lock(mu_);
  links_.push_back(link);
}

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
  std::vector<Link*> links;
  while (!stop_) {
    links = links_;  // the list only grows; the links outlive this thread
    lock.unlock();
    auto now = Clock::now();
    for (Link* link : links) link->service(now);
    lock.lock();
    cv_.wait_for(lock, tick_, [this] { return stop_; });
  }
}

}  // namespace tpnode::mesh
