// POST /v1/completions and POST /v1/chat/completions: parse, submit to the engine, then either
// stream server-sent events or answer once with the whole completion.
//
// Contract: runs on the connection's strand. Throws ApiError for anything that fails before
// the first byte of the answer is written (the router turns it into a 4xx/5xx answer); after
// that, errors are reported inside the stream. Returns false when the connection must be
// closed (the client went away, a write failed). Every engine request it submits is either
// finished by the engine or cancelled by it before it returns.
#pragma once

#include "node/api/connection.h"
#include "node/api/openai_request.h"
#include "node/api/server_context.h"

namespace tpnode::node::api {

struct GenerationResult {
  bool keep_open = true;
  int status = 200;
};

net::awaitable<GenerationResult> handleGeneration(ServerContext& ctx, Connection& conn,
                                                  const Request& request, Endpoint endpoint);

}  // namespace tpnode::node::api
