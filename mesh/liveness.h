// The liveness thread: every tick it services each link (drains incoming frames when no
// caller is reading, sends a heartbeat on links idle for heartbeat_interval, and fails links
// silent for longer than the liveness timeout; see Link::service). It only try-locks, so
// compute never blocks it and it never blocks compute.
//
// Contract: links are added while the mesh forms (add() from any thread) and outlive the
// Liveness object; stop() (or the destructor) joins the thread.
#pragma once

#include <chrono>
#include <thread>
#include <vector>

#include "common/mutex.h"
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
  Mutex mu_;
  CondVar cv_;
  std::vector<Link*> links_ TP_GUARDED_BY(mu_);
  bool stop_ TP_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace tpnode::mesh
