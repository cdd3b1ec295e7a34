// The Responses API (docs/api.md): POST /v1/responses generates (streamed or whole) through
// the engine as a chat turn whose messages are the instructions, the conversation stored under
// previous_response_id and the new input; with "store" (the default) the response and its
// conversation are kept in ServerContext::responses. GET and DELETE /v1/responses/{id} read
// and remove stored responses; GET /v1/responses/{id}/input_items lists the input items a stored
// response was generated from.
//
// Contract: runs on the connection's strand; as generation_handler.h, throws ApiError for
// anything that fails before the answer starts (400 bad body, 404 unknown id or
// previous_response_id in OpenAI's error shape, 503 when the cluster or the response store is
// unavailable), reports later failures inside the stream (response.failed). Store calls run
// off the I/O threads (ServerContext::responses, node/api/response_store_worker.h): the
// coroutine waits for at most about three store timeouts (--redis-timeout) while its I/O
// thread serves other connections. A response that cannot be stored is still answered (the
// failure is logged and counted).
#pragma once

#include <string_view>

#include "node/api/connection.h"
#include "node/api/generation_handler.h"
#include "node/api/server_context.h"

namespace tpnode::node::api {

net::awaitable<GenerationResult> handleCreateResponse(ServerContext& ctx, Connection& conn,
                                                      const Request& request);

// GET (the stored response object) or DELETE ({"id", "object": "response", "deleted": true})
// of /v1/responses/{id}. Throws ApiError.
net::awaitable<Response> storedResponseAnswer(ServerContext& ctx, http::verb method,
                                              std::string_view id, bool keep_alive);

// GET /v1/responses/{id}/input_items (node/api/response_input_items.h): `query` is what follows
// '?' in the target. Throws ApiError (400 for a bad limit, order or after; 404 unknown id; 503
// store unavailable).
net::awaitable<Response> inputItemsAnswer(ServerContext& ctx, std::string_view id,
                                          std::string_view query, bool keep_alive);

}  // namespace tpnode::node::api
