// The liveness thread: every tick it services each link (drains incoming frames when no
// caller is reading, sends a heartbeat on links idle for heartbeat_interval, and fails links
// silent for longer than the liveness timeout; see Link::service). It only try-locks, so
// compute never blocks it and it never blocks compute.
//
// Contract: links are added while the mesh forms (add() from any thread) and outlive the
// Liveness object; stop() (or the destructor) joins the thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "mesh/link.h"

namespace tpnode::mesh {

class Liveness {
 public:
  explicit Liveness(std::chrono::milliseconds tick);
  ~Liveness() { stop(); }
  Liveness(const Liveness&) = delete;
  Liveness& operator=(const Liveness&) = delete;

  void add(Link* link);
  void stop();

 private:
  void loop();

  const std::chrono::milliseconds tick_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Link*> links_;  // guarded by mu_
  bool stop_ = false;         // guarded by mu_
  std::thread thread_;
};

}  // namespace tpnode::mesh
