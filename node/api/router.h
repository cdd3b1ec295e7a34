// The route table of the API: authenticates /v1/*, dispatches, answers errors in OpenAI's
// shape, and records every request in the metrics.
//
//   GET  /                      chat page (ApiOptions::serve_ui)
//   GET  /health                200 {"status":"ok"} / 503 with the reason (no key needed)
//   GET  /metrics               Prometheus text (no key needed)
//   GET  /v1/models             the served model
//   POST /v1/completions        see generation_handler.h
//   POST /v1/chat/completions
//   POST /v1/responses, GET/DELETE /v1/responses/{id}   responses_handler.h
//   POST /tokenize, POST /detokenize, GET /props   llama.cpp's server (llama_handler.h)
//
// Contract: runs on the connection's strand; never throws; returns whether the connection may
// stay open.
#pragma once

#include "node/api/connection.h"
#include "node/api/server_context.h"

namespace tpnode::node::api {

net::awaitable<bool> handleRequest(ServerContext& ctx, Connection& conn, const Request& request);

// Whether `header` (the Authorization value) carries one of `keys` as a Bearer token.
bool authorized(const std::vector<std::string>& keys, std::string_view header);

}  // namespace tpnode::node::api
