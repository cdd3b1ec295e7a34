// The last line of defence against a hang: if the run is not over by the deadline, says so on
// stderr and ends the process with kExitInternal. Every check bounds itself (liveness timeout,
// connect timeout); this only catches what they miss.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace tpnode::tptopo {

class Watchdog {
 public:
  explicit Watchdog(std::chrono::duration<double> limit);
  ~Watchdog();  // disarms and joins
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace tpnode::tptopo
