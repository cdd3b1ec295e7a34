// One HTTP/1.1 connection: reads requests (bounded header and body, timeouts, keep-alive,
// "Expect: 100-continue"), hands each to the router, and closes on errors. A malformed request
// gets a 4xx answer and the connection is closed; nothing a client sends can crash the server.
//
// Contract: the coroutine runs on the socket's strand; `tls` is null for plain HTTP, else it
// must outlive the coroutine (ApiServer owns it, and destroys its io_context first).
#pragma once

#include <memory>

#include <boost/asio/ssl.hpp>

#include "node/api/http_types.h"
#include "node/api/server_context.h"

namespace tpnode::node::api {

// `slot` is the connection's place under --max-connections (ConnectionLimit); it is released
// before the socket is closed.
net::awaitable<void> serveConnection(ServerContext& ctx, tcp::socket socket,
                                     std::unique_ptr<ConnectionLimit::Slot> slot,
                                     net::ssl::context* tls);

}  // namespace tpnode::node::api
