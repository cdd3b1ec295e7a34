// Submission: one engine request as a connection sees it, shared by the generation handlers
// (generation_handler.h, responses_handler.h): it records the request in flight and in the
// metrics, and its destructor cancels the engine request unless it finished. nextEvents()
// waits for the next token events and notices a client that went away.
//
// Contract: used on the connection's strand only; the engine (and ServerContext) outlive it.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "node/api/connection.h"
#include "node/api/server_context.h"

namespace tpnode::node::api {

class Submission {
 public:
  Submission(ServerContext& ctx, std::shared_ptr<GenerationEvents> events, uint64_t id,
             int prompt_tokens);
  Submission(const Submission&) = delete;
  Submission& operator=(const Submission&) = delete;
  ~Submission();

  // Counts the tokens of `event` for the metrics; marks the end.
  void account(const TokenEvent& event);
  // The client is gone or a stop sequence matched: the engine need not go on.
  void cancel();
  uint64_t id() const { return id_; }

 private:
  ServerContext& ctx_;
  std::shared_ptr<GenerationEvents> events_;
  uint64_t id_;
  std::chrono::steady_clock::time_point submitted_;
  bool engine_done_ = false;
  bool first_token_seen_ = false;
};

// Waits for the next events into `out`; returns false when the client went away (after
// cancelling the submission).
net::awaitable<bool> nextEvents(ServerContext& ctx, Connection& conn, GenerationEvents& events,
                                net::steady_timer& timer, Submission& sub,
                                std::vector<TokenEvent>& out);

}  // namespace tpnode::node::api
