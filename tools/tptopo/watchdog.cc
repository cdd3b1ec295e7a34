#include "tools/tptopo/watchdog.h"

#include <cstdio>
#include <cstdlib>

#include "tools/tptopo/report.h"

namespace tpnode::tptopo {

Watchdog::Watchdog(std::chrono::duration<double> limit) {
  thread_ = std::thread([this, limit] {
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, limit, [this] { return done_; })) return;
    std::fprintf(stderr,
                 "tptopo: the self-test did not finish within %.0f s (--timeout); giving up\n",
                 limit.count());
    std::fflush(stderr);
    std::_Exit(kExitInternal);
  });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

}  // namespace tpnode::tptopo
