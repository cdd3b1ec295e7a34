#include "node/api/http_types.h"

namespace tpnode::node::api {

Response makeResponse(int status, std::string content_type, std::string body, bool keep_alive) {
  Response res{static_cast<http::status>(status), 11};
  res.set(http::field::server, "tpnode");
  res.set(http::field::content_type, std::move(content_type));
  res.keep_alive(keep_alive);
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

Response jsonResponse(int status, const nlohmann::json& body, bool keep_alive) {
  return makeResponse(status, "application/json", dumpJson(body), keep_alive);
}

Response errorResponse(const ApiError& error, bool keep_alive) {
  Response res = jsonResponse(error.status(), error.body(), keep_alive);
  if (error.status() == 401) res.set(http::field::www_authenticate, "Bearer");
  if (error.status() == 429 || error.status() == 503) res.set(http::field::retry_after, "1");
  return res;
}

}  // namespace tpnode::node::api
