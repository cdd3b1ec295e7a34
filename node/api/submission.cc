#include "node/api/submission.h"

// GCC 12's -Wmismatched-new-delete false positive in Asio's coroutine frames (see
// generation_handler.cc).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

#include "common/log.h"

namespace tpnode::node::api {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

Submission::Submission(ServerContext& ctx, std::shared_ptr<GenerationEvents> events, uint64_t id,
                       int prompt_tokens)
    : ctx_(ctx), events_(std::move(events)), id_(id), submitted_(Clock::now()) {
  ctx_.in_flight.add(id_);
  ctx_.metrics.generationStarted(prompt_tokens);
}

Submission::~Submission() {
  if (!engine_done_) ctx_.engine.cancel(id_);
  events_->detach();
  ctx_.in_flight.remove(id_);
  ctx_.metrics.generationFinished(first_token_seen_);
}

void Submission::account(const TokenEvent& event) {
  if (event.id >= 0) {
    if (!first_token_seen_) ctx_.metrics.firstToken(secondsSince(submitted_));
    first_token_seen_ = true;
    ctx_.metrics.tokensGenerated(1);
  }
  if (event.finished) engine_done_ = true;
}

void Submission::cancel() {
  if (!engine_done_) ctx_.engine.cancel(id_);
  engine_done_ = true;
}

net::awaitable<bool> nextEvents(ServerContext& ctx, Connection& conn, GenerationEvents& events,
                                net::steady_timer& timer, Submission& sub,
                                std::vector<TokenEvent>& out) {
  co_await events.wait(timer);
  if (events.takeReadable()) {
    PeerState state = conn.peerState();
    if (state == PeerState::kClosed) {
      spdlog::debug("[api] client of request {} went away; cancelling it", sub.id());
      ctx.metrics.cancelledByClient();
      sub.cancel();
      co_return false;
    }
    // Pipelined bytes: leave them for the next request; a write failure still tells.
    if (state == PeerState::kOpen) conn.watchReadable(events.shared_from_this());
  }
  out = events.take();
  co_return true;
}

}  // namespace tpnode::node::api
