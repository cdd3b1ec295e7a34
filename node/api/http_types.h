// Beast/Asio aliases and small response helpers shared by the HTTP side of node/api/.
#pragma once

#include <utility>  // std::exchange, needed by asio/awaitable.hpp before <boost/asio.hpp>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "node/api/api_error.h"

namespace tpnode::node::api {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

// Beast 1.74's string_view is boost's.
inline std::string_view sv(beast::string_view s) {
  return {s.data(), s.size()};
}

Response makeResponse(int status, std::string content_type, std::string body, bool keep_alive);
Response jsonResponse(int status, const nlohmann::json& body, bool keep_alive);
Response errorResponse(const ApiError& error, bool keep_alive);

}  // namespace tpnode::node::api
