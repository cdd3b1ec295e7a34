// GET /v1/tensors and GET /v1/tensors/{name}?format=npy|raw: the model's parameters as the
// cluster holds them, gathered from every rank (docs/inspection.md, docs/api.md).
//
// Contract: runs on the connection's strand. The listing does not enter the engine's step
// loop; a read is queued to the engine (Engine::readTensor) and awaited without blocking the
// I/O thread. Throws ApiError before the first byte is written: 400 for a bad `format`, 404 for
// an unknown name, 503 when the cluster is not ready or the read failed.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "node/api/connection.h"
#include "node/api/generation_handler.h"
#include "node/api/server_context.h"

namespace tpnode::node::api {

// `path` is the request path without the query; `query` what follows '?', or empty.
net::awaitable<GenerationResult> handleTensors(ServerContext& ctx, Connection& conn,
                                               const Request& request, std::string_view path,
                                               std::string_view query);

// Percent-decoding of a URL path segment, or of a query value (plus_is_space: '+' means ' ');
// nullopt on a malformed escape or a NUL byte (received bytes are hostile).
std::optional<std::string> percentDecode(std::string_view in, bool plus_is_space = false);

// The value of `key` in an application/x-www-form-urlencoded query, nullopt when absent.
// Throws ApiError(400) naming the key when its value is malformed.
std::optional<std::string> queryValue(std::string_view query, std::string_view key);

}  // namespace tpnode::node::api
