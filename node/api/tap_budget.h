// TapBudget: bounds the activation taps in flight across all connections (docs/inspection.md):
// at most `max_requests` requests with taps at once, holding at most `max_bytes` of tap values
// (4 bytes per value, as the engine keeps them; the JSON text of a response is larger).
//
// Contract: acquire() is called from any connection before the request is submitted; the
// returned Lease is held until the response is written and gives the budget back when
// destroyed. Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

namespace tpnode::node::api {

class TapBudget {
 public:
  class Lease {
   public:
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;

   private:
    friend class TapBudget;
    Lease(TapBudget& budget, uint64_t bytes) : budget_(budget), bytes_(bytes) {}
    TapBudget& budget_;  // the server's; outlives every connection
    const uint64_t bytes_;
  };

  TapBudget(int max_requests, uint64_t max_bytes)
      : max_requests_(max_requests), max_bytes_(max_bytes) {}

  // Reserves `bytes` for one request. Throws ApiError 429 (code "tap_budget_exhausted") when
  // the request or byte budget is in use by others right now, 400 when `bytes` alone exceed
  // max_bytes (it can never fit).
  std::unique_ptr<Lease> acquire(uint64_t bytes);
  uint64_t refused() const;

 private:
  const int max_requests_;
  const uint64_t max_bytes_;
  mutable std::mutex mu_;
  int requests_ = 0;      // guarded by mu_
  uint64_t bytes_ = 0;    // guarded by mu_
  uint64_t refused_ = 0;  // guarded by mu_
};

}  // namespace tpnode::node::api
