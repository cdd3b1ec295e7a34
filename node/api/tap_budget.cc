#include "node/api/tap_budget.h"

#include <fmt/format.h>

#include "node/api/api_error.h"

namespace tpnode::node::api {

std::unique_ptr<TapBudget::Lease> TapBudget::acquire(uint64_t bytes) {
  std::lock_guard lock(mu_);
  if (bytes > max_bytes_) {
    ++refused_;
    throw ApiError(400,
                   fmt::format("the taps of this request need {} bytes of activations; the "
                               "server holds at most {} (--max-tap-bytes): ask for fewer taps or "
                               "a shorter prompt",
                               bytes, max_bytes_),
                   "invalid_request_error", "taps", "tap_budget_exceeded");
  }
  if (requests_ >= max_requests_ || bytes_ + bytes > max_bytes_) {
    ++refused_;
    throw ApiError(429,
                   fmt::format("too many activation taps in flight: {} of {} tap requests "
                               "(--max-tap-requests) and {} of {} bytes (--max-tap-bytes) are in "
                               "use; retry when they finish",
                               requests_, max_requests_, bytes_, max_bytes_),
                   "rate_limit_error", "taps", "tap_budget_exhausted");
  }
  ++requests_;
  bytes_ += bytes;
  return std::unique_ptr<Lease>(new Lease(*this, bytes));
}

TapBudget::Lease::~Lease() {
  std::lock_guard lock(budget_.mu_);
  --budget_.requests_;
  budget_.bytes_ -= bytes_;
}

uint64_t TapBudget::refused() const {
  std::lock_guard lock(mu_);
  return refused_;
}

}  // namespace tpnode::node::api
