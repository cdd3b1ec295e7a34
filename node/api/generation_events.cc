#include "node/api/generation_events.h"

namespace tpnode::node::api {

void GenerationEvents::wakeLocked() {
  if (!strand_ || wake_pending_) return;
  wake_pending_ = true;
  net::post(*strand_, [self = shared_from_this()] {
    {
      std::lock_guard lock(self->mu_);
      self->wake_pending_ = false;
    }
    if (self->waiting_) self->waiting_->cancel();
  });
}

void GenerationEvents::push(const TokenEvent& event) {
  std::lock_guard lock(mu_);
  if (!strand_) return;
  events_.push_back(event);
  wakeLocked();
}

void GenerationEvents::notifyReadable() {
  std::lock_guard lock(mu_);
  if (!strand_) return;
  readable_ = true;
  wakeLocked();
}

net::awaitable<void> GenerationEvents::wait(net::steady_timer& timer) {
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (!events_.empty() || readable_) co_return;
    }
    // No yield between the check above and the start of the wait: a wake-up runs on the same
    // strand, so it either came before the check or cancels this wait.
    waiting_ = &timer;
    timer.expires_at(net::steady_timer::time_point::max());
    boost::system::error_code ec;
    co_await timer.async_wait(net::redirect_error(net::use_awaitable, ec));
    waiting_ = nullptr;
  }
}

std::vector<TokenEvent> GenerationEvents::take() {
  std::lock_guard lock(mu_);
  std::vector<TokenEvent> out(std::make_move_iterator(events_.begin()),
                              std::make_move_iterator(events_.end()));
  events_.clear();
  return out;
}

bool GenerationEvents::takeReadable() {
  std::lock_guard lock(mu_);
  return std::exchange(readable_, false);
}

void GenerationEvents::detach() {
  std::lock_guard lock(mu_);
  strand_.reset();
  events_.clear();
  waiting_ = nullptr;
}

}  // namespace tpnode::node::api
