#include "node/api/router.h"

#include <chrono>
#include <iterator>

#include <prometheus/text_serializer.h>

#include "common/log.h"
#include "node/api/chat_ui.h"
#include "node/api/generation_handler.h"
#include "node/api/llama_handler.h"
#include "node/api/responses_handler.h"
#include "node/api/tensor_handler.h"

namespace tpnode::node::api {
namespace {

using nlohmann::json;

// Compares without an early exit (the time tells the length, not the bytes).
bool equalConstantTime(std::string_view key, std::string_view given) {
  unsigned diff = key.size() == given.size() ? 0u : 1u;
  for (size_t i = 0; i < key.size(); ++i) {
    unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= static_cast<unsigned>(static_cast<unsigned char>(key[i]) ^ g);
  }
  return diff == 0;
}

Response health(ServerContext& ctx, bool keep_alive) {
  if (ctx.engine.ready()) return jsonResponse(200, {{"status", "ok"}}, keep_alive);
  return jsonResponse(503, {{"status", "unavailable"}, {"reason", ctx.engine.notReadyReason()}},
                      keep_alive);
}

Response models(ServerContext& ctx, bool keep_alive) {
  ModelInfo m = ctx.engine.modelInfo();
  json entry = {{"id", m.id},
                {"object", "model"},
                {"created", m.created_unix},
                {"owned_by", "tpnode"},
                {"max_model_len", m.context_length},
                // Whether the file carries tokenizer.chat_template (chat still works without
                // one, in the architecture's default format).
                {"meta", {{"chat_template", m.has_chat_template}, {"n_vocab", m.n_vocab}}}};
  return jsonResponse(200, {{"object", "list"}, {"data", json::array({entry})}}, keep_alive);
}

Response metrics(ServerContext& ctx, bool keep_alive) {
  std::vector<prometheus::MetricFamily> families = ctx.metrics.collect();
  std::vector<prometheus::MetricFamily> engine = ctx.engine.metricFamilies();
  families.insert(families.end(), std::make_move_iterator(engine.begin()),
                  std::make_move_iterator(engine.end()));
  std::string text = prometheus::TextSerializer().Serialize(families);
  return makeResponse(200, "text/plain; version=0.0.4; charset=utf-8", std::move(text), keep_alive);
}

struct Route {
  const char* path;
  http::verb method;
  bool needs_key;
  http::verb other_method = http::verb::unknown;  // a second method the path takes
};

constexpr Route kRoutes[] = {
    {"/", http::verb::get, false},
    {"/health", http::verb::get, false},
    {"/metrics", http::verb::get, false},
    {"/v1/models", http::verb::get, true},
    {"/v1/completions", http::verb::post, true},
    {"/v1/chat/completions", http::verb::post, true},
    {"/tokenize", http::verb::post, true},
    {"/detokenize", http::verb::post, true},
    {"/props", http::verb::get, true},
    {"/v1/responses", http::verb::post, true},
    {"/v1/responses/{id}", http::verb::get, true, http::verb::delete_},
    {"/v1/responses/{id}/input_items", http::verb::get, true},
    {"/v1/tensors", http::verb::get, true},
    {"/v1/tensors/{name}", http::verb::get, true},
};

constexpr std::string_view kResponsePrefix = "/v1/responses/";
constexpr std::string_view kInputItemsSuffix = "/input_items";

bool isInputItems(std::string_view path) {
  return path.size() > kResponsePrefix.size() + kInputItemsSuffix.size() &&
         path.substr(path.size() - kInputItemsSuffix.size()) == kInputItemsSuffix;
}

const Route* routeNamed(std::string_view name) {
  for (const Route& r : kRoutes) {
    if (name == r.path) return &r;
  }
  return nullptr;
}

const Route* findRoute(std::string_view path) {
  for (std::string_view prefix : {std::string_view("/v1/tensors/"), kResponsePrefix}) {
    if (path.size() > prefix.size() && path.substr(0, prefix.size()) == prefix) {
      if (prefix != kResponsePrefix) return routeNamed("/v1/tensors/{name}");
      return routeNamed(isInputItems(path) ? "/v1/responses/{id}/input_items"
                                           : "/v1/responses/{id}");
    }
  }
  return routeNamed(path);
}

// Answers everything but the generation routes. Throws ApiError.
Response simpleAnswer(ServerContext& ctx, std::string_view path, const Request& request,
                      bool keep_alive) {
  if (path == "/tokenize")
    return jsonResponse(200, tokenizeAnswer(ctx.engine, request.body()), keep_alive);
  if (path == "/detokenize") {
    return jsonResponse(200, detokenizeAnswer(ctx.engine, request.body()), keep_alive);
  }
  if (path == "/props")
    return jsonResponse(200, propsAnswer(ctx.engine, ctx.options.defaults), keep_alive);
  if (path == "/health") return health(ctx, keep_alive);
  if (path == "/metrics") return metrics(ctx, keep_alive);
  if (path == "/v1/models") return models(ctx, keep_alive);
  if (!ctx.options.serve_ui) throw ApiError(404, "no page here", "not_found_error");
  return makeResponse(200, "text/html; charset=utf-8", std::string(chatUiHtml()), keep_alive);
}

}  // namespace

bool authorized(const std::vector<std::string>& keys, std::string_view header) {
  if (keys.empty()) return true;
  constexpr std::string_view kScheme = "bearer ";
  if (header.size() <= kScheme.size()) return false;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(header[i])) != kScheme[i]) return false;
  }
  std::string_view token = header.substr(kScheme.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  bool ok = false;
  for (const auto& key : keys) ok |= equalConstantTime(key, token);
  return ok;
}

net::awaitable<bool> handleRequest(ServerContext& ctx, Connection& conn, const Request& request) {
  const auto start = std::chrono::steady_clock::now();
  const bool keep_alive = request.keep_alive();
  std::string_view target = sv(request.target());
  std::string_view path = target.substr(0, target.find('?'));
  const std::string_view query =
      target.size() > path.size() ? target.substr(path.size() + 1) : std::string_view{};
  const Route* route = findRoute(path);
  std::string route_label = route ? route->path : "other";

  GenerationResult result;
  std::optional<ApiError> error;
  try {
    if (!route) throw ApiError(404, fmt::format("no route for {}", path), "not_found_error");
    if (request.method() != route->method && request.method() != route->other_method) {
      throw ApiError(
          405,
          route->other_method == http::verb::unknown
              ? fmt::format("{} takes {}", route->path, sv(http::to_string(route->method)))
              : fmt::format("{} takes {} or {}", route->path, sv(http::to_string(route->method)),
                            sv(http::to_string(route->other_method))),
          "invalid_request_error");
    }
    if (route->needs_key &&
        !authorized(ctx.options.api_keys, sv(request[http::field::authorization]))) {
      throw ApiError(401,
                     "Incorrect or missing API key: send the header 'Authorization: Bearer "
                     "<key>' with a key from the server's --api-key-file",
                     "invalid_request_error", "", "invalid_api_key");
    }
    if (path == "/v1/completions" || path == "/v1/chat/completions") {
      Endpoint ep = path == "/v1/completions" ? Endpoint::kCompletions : Endpoint::kChat;
      result = co_await handleGeneration(ctx, conn, request, ep);
    } else if (path == "/v1/responses") {
      result = co_await handleCreateResponse(ctx, conn, request);
    } else if (route_label == "/v1/responses/{id}") {
      Response res = co_await storedResponseAnswer(ctx, request.method(),
                                                   path.substr(kResponsePrefix.size()), keep_alive);
      result.status = res.result_int();
      result.keep_open = co_await conn.write(std::move(res));
    } else if (route_label == "/v1/responses/{id}/input_items") {
      std::string_view id = path.substr(kResponsePrefix.size());
      id.remove_suffix(kInputItemsSuffix.size());
      Response res = co_await inputItemsAnswer(ctx, id, query, keep_alive);
      result.status = res.result_int();
      result.keep_open = co_await conn.write(std::move(res));
    } else if (route_label.rfind("/v1/tensors", 0) == 0) {
      result = co_await handleTensors(ctx, conn, request, path, query);
    } else {
      Response res = simpleAnswer(ctx, path, request, keep_alive);
      result.status = res.result_int();
      result.keep_open = co_await conn.write(std::move(res));
    }
  } catch (const ApiError& e) {
    error = e;
  } catch (const Error& e) {
    error = fromEngineError(e);
  } catch (const std::exception& e) {
    spdlog::error("[api] {} {}: {}", sv(request.method_string()), path, e.what());
    error = ApiError(500, std::string("internal error: ") + e.what(), "server_error");
  }
  if (error) {
    Response res = errorResponse(*error, keep_alive);
    if (error->status() == 405 && route) {
      std::string allow(sv(http::to_string(route->method)));
      if (route->other_method != http::verb::unknown) {
        allow += ", " + std::string(sv(http::to_string(route->other_method)));
      }
      res.set(http::field::allow, allow);
    }
    result.status = error->status();
    result.keep_open = co_await conn.write(std::move(res));
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ctx.metrics.requestFinished(route_label, result.status, seconds);
  spdlog::debug("[api] {} {} -> {} in {:.3f} s", sv(request.method_string()), path, result.status,
                seconds);
  co_return result.keep_open;
}

}  // namespace tpnode::node::api
