#include "mesh/liveness.h"

namespace tpnode::mesh {

Liveness::Liveness(std::chrono::milliseconds tick) : tick_(tick), thread_([this] { loop(); }) {}

void Liveness::add(Link* link) {
  MutexLock lock(mu_);
  links_.push_back(link);
}

void Liveness::stop() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notifyAll();
  if (thread_.joinable()) thread_.join();
}

void Liveness::loop() {
  MutexLock lock(mu_);
  std::vector<Link*> links;
  while (!stop_) {
    links = links_;  // the list only grows; the links outlive this thread
    lock.unlock();
    auto now = Clock::now();
    for (Link* link : links) link->service(now);
    lock.lock();
    const auto until = std::chrono::steady_clock::now() + tick_;
    while (!stop_ && cv_.waitUntil(mu_, until)) {
    }
  }
}

}  // namespace tpnode::mesh
