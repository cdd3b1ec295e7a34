// GenerationEvents: hands one request's TokenEvents from the engine's loop thread to the
// connection that waits for them (llama.cpp's "response reader").
//
// Contract
// - push() and notifyReadable() may be called from any thread and never block beyond a short
//   mutex; they wake the consumer by posting to the connection's strand.
// - wait()/take()/takeReadable() are called by the consumer coroutine on that strand only.
// - detach() (consumer's strand, or any thread once the I/O threads are joined): afterwards
//   push() drops events and the object holds nothing of the io_context, so the engine may keep
//   it (inside its on_event callback) longer than the server lives.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "node/api/http_types.h"
#include "node/engine.h"

namespace tpnode::node::api {

class GenerationEvents : public std::enable_shared_from_this<GenerationEvents> {
 public:
  explicit GenerationEvents(net::any_io_executor strand) : strand_(std::move(strand)) {}

  void push(const TokenEvent& event);
  // The client's socket became readable (data, or the client closed it).
  void notifyReadable();

  // Returns when an event or a readable note is there. `timer` lives in the caller's frame.
  net::awaitable<void> wait(net::steady_timer& timer);
  std::vector<TokenEvent> take();
  bool takeReadable();

  void detach();

 private:
  void wakeLocked();

  std::mutex mu_;
  std::deque<TokenEvent> events_;               // guarded by mu_
  bool readable_ = false;                       // guarded by mu_
  bool wake_pending_ = false;                   // guarded by mu_
  std::optional<net::any_io_executor> strand_;  // guarded by mu_; reset by detach()
  net::steady_timer* waiting_ = nullptr;        // strand only: the timer wait() sleeps on
};

}  // namespace tpnode::node::api
