#include "node/api/responses_handler.h"

// GCC 12's -Wmismatched-new-delete false positive in Asio's coroutine frames (see
// generation_handler.cc).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

#include <cctype>

#include "common/log.h"
#include "node/api/api_error.h"
#include "node/api/generation_output.h"
#include "node/api/openai_request.h"
#include "node/api/response_input_items.h"
#include "node/api/response_store.h"
#include "node/api/responses_output.h"
#include "node/api/responses_request.h"
#include "node/api/submission.h"

namespace tpnode::node::api {
namespace {

using nlohmann::json;

constexpr size_t kMaxIdLength = 128;

// Ids we could have made: "resp_" and letters, digits, '_' or '-' (anything else is unknown
// without asking the store).
bool plausibleId(std::string_view id) {
  if (id.size() <= 5 || id.size() > kMaxIdLength || id.substr(0, 5) != "resp_") return false;
  for (char c : id) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  }
  return true;
}

ApiError responseNotFound(std::string_view id) {
  return ApiError(
      404, fmt::format("Response with id {} not found.", describeValue(json(std::string(id)))),
      "invalid_request_error");
}

ApiError storeUnavailable(ServerContext& ctx, const Error& e) {
  ctx.metrics.responseStoreFailed();
  return ApiError(503,
                  fmt::format("the response store ({}) is unavailable: {}. Nothing was changed "
                              "or lost by this request; retry once the store answers again "
                              "(check that it runs and that this server reaches it within "
                              "--redis-timeout: --responses-store-redis-url)",
                              ctx.responses.describe(), e.what()),
                  "service_unavailable", "", "response_store_unavailable");
}

// The stored response `id` (nullopt: unknown); 503 when the store cannot tell.
net::awaitable<std::optional<StoredResponse>> lookup(ServerContext& ctx, std::string_view id) {
  if (!plausibleId(id)) co_return std::nullopt;
  std::optional<StoredResponse> found;
  std::optional<ApiError> failed;
  try {
    found = co_await ctx.responses.get(std::string(id));
  } catch (const Error& e) {
    failed = storeUnavailable(ctx, e);
  }
  if (failed) throw *failed;
  co_return found;
}

// Keeps the response when asked to; a failure is counted and logged, the answer still goes out.
net::awaitable<void> store(ServerContext& ctx, const ResponseFacts& facts,
                           const ResponseOutcome& outcome, std::vector<ChatMessage> conversation) {
  if (!facts.request.store || responseStatus(outcome) == "failed") co_return;
  conversation.push_back({"assistant", outcome.text});
  StoredResponse stored{facts.id, responseObject(facts, &outcome), std::move(conversation)};
  try {
    co_await ctx.responses.put(std::move(stored));
  } catch (const Error& e) {
    ctx.metrics.responseStoreFailed();
    static LogLimiter limiter;
    if (auto held = limiter.pass()) {
      spdlog::warn("[api] response {} answered but not stored in {}: {}{}", facts.id,
                   ctx.responses.describe(), e.what(), heldBackNote(*held));
    }
  }
}

ResponseOutcome outcomeOf(const GenerationOutput& out, std::string text, int cached_tokens) {
  ResponseOutcome o;
  o.finish_reason = out.finishReason();
  o.text = std::move(text);
  o.error = out.error();
  o.input_tokens = out.promptTokens();
  o.output_tokens = out.completionTokens();
  o.cached_tokens = cached_tokens;
  return o;
}

// Everything a running response needs.
struct Turn {
  ServerContext& ctx;
  Connection& conn;
  GenerationEvents& events;
  Submission& sub;
  GenerationOutput& out;
  const ResponseFacts& facts;
  std::vector<ChatMessage> conversation;  // stored with the output (instructions excluded)
  bool keep_alive;
};

// Feeds events until the generation finished; false when the client went away. `on_text`
// gets each piece of text.
template <typename OnText>
net::awaitable<bool> generate(Turn& t, std::string& text, int& cached, OnText on_text) {
  net::steady_timer timer(co_await net::this_coro::executor);
  while (!t.out.finished()) {
    std::vector<TokenEvent> batch;
    if (!co_await nextEvents(t.ctx, t.conn, t.events, timer, t.sub, batch)) co_return false;
    for (const TokenEvent& ev : batch) {
      t.sub.account(ev);
      if (ev.finished) cached = ev.cached_tokens;
      Delta d = t.out.onEvent(ev);
      if (!d.text.empty()) {
        text += d.text;
        if (!co_await on_text(d.text)) co_return false;
      }
      if (t.out.finished()) break;
    }
  }
  t.conn.cancelWatch();
  co_return true;
}

net::awaitable<GenerationResult> wholeResponse(Turn& t) {
  std::string text;
  int cached = 0;
  auto ignore = [](const std::string&) -> net::awaitable<bool> { co_return true; };
  if (!co_await generate(t, text, cached, ignore)) co_return GenerationResult{false, 499};
  ResponseOutcome outcome = outcomeOf(t.out, std::move(text), cached);
  if (responseStatus(outcome) == "failed") {
    ApiError err(503, outcome.error, "service_unavailable", "", "generation_failed");
    bool ok = co_await t.conn.write(errorResponse(err, t.keep_alive));
    co_return GenerationResult{ok, 503};
  }
  co_await store(t.ctx, t.facts, outcome, std::move(t.conversation));
  bool ok =
      co_await t.conn.write(jsonResponse(200, responseObject(t.facts, &outcome), t.keep_alive));
  co_return GenerationResult{ok, 200};
}

net::awaitable<GenerationResult> streamedResponse(Turn& t) {
  if (!co_await t.conn.writeStreamHeader(t.keep_alive)) co_return GenerationResult{false, 200};
  ResponseEventStream es;
  const json item_ref = {
      {"item_id", t.facts.message_id}, {"output_index", 0}, {"content_index", 0}};
  std::string head = es.event("response.created", {{"response", responseObject(t.facts, nullptr)}});
  head += es.event("response.in_progress", {{"response", responseObject(t.facts, nullptr)}});
  head += es.event("response.output_item.added",
                   {{"output_index", 0}, {"item", messageItem(t.facts, "in_progress", "")}});
  json part_added = item_ref;
  part_added["part"] = outputTextPart("");
  head += es.event("response.content_part.added", part_added);
  if (!co_await t.conn.writeChunk(head)) co_return GenerationResult{false, 200};

  std::string text;
  int cached = 0;
  auto on_text = [&](const std::string& piece) -> net::awaitable<bool> {
    json delta = item_ref;
    delta["delta"] = piece;
    delta["logprobs"] = json::array();
    co_return co_await t.conn.writeChunk(es.event("response.output_text.delta", delta));
  };
  if (!co_await generate(t, text, cached, on_text)) co_return GenerationResult{false, 200};

  ResponseOutcome outcome = outcomeOf(t.out, text, cached);
  const std::string status = responseStatus(outcome);
  std::string tail;
  if (status == "failed") {
    tail = es.event("response.failed", {{"response", responseObject(t.facts, &outcome)}});
  } else {
    json done = item_ref;
    done["text"] = text;
    done["logprobs"] = json::array();
    tail += es.event("response.output_text.done", done);
    json part_done = item_ref;
    part_done["part"] = outputTextPart(text);
    tail += es.event("response.content_part.done", part_done);
    tail += es.event("response.output_item.done",
                     {{"output_index", 0}, {"item", messageItem(t.facts, status, text)}});
    co_await store(t.ctx, t.facts, outcome, std::move(t.conversation));
    tail += es.event(status == "completed" ? "response.completed" : "response.incomplete",
                     {{"response", responseObject(t.facts, &outcome)}});
  }
  bool ok = co_await t.conn.writeChunk(tail) && co_await t.conn.writeLastChunk();
  co_return GenerationResult{ok, 200};
}

}  // namespace

net::awaitable<GenerationResult> handleCreateResponse(ServerContext& ctx, Connection& conn,
                                                      const Request& request) {
  ResponsesRequest req = parseResponsesRequest(request.body(), ctx.options.defaults);
  if (!ctx.engine.ready()) {
    throw ApiError(503, "the cluster is not ready: " + ctx.engine.notReadyReason(),
                   "service_unavailable", "", "not_ready");
  }
  std::vector<ChatMessage> previous;
  if (!req.previous_response_id.empty()) {
    std::optional<StoredResponse> prev = co_await lookup(ctx, req.previous_response_id);
    if (!prev) {
      throw ApiError(404,
                     fmt::format("Previous response with id {} not found.",
                                 describeValue(json(req.previous_response_id))),
                     "invalid_request_error", "previous_response_id",
                     "previous_response_not_found");
    }
    previous = std::move(prev->conversation);
  }
  ModelInfo model = ctx.engine.modelInfo();
  OpenAiRequest chat;
  chat.endpoint = Endpoint::kChat;
  chat.model = req.model;
  chat.messages = modelMessages(req, previous);
  chat.max_tokens = req.max_output_tokens;
  chat.sampling = req.sampling;
  GenerationRequest gen = prepareGeneration(chat, ctx.engine, model, ctx.options.defaults);
  const int prompt_tokens = static_cast<int>(gen.prompt_ids.size());

  auto events = std::make_shared<GenerationEvents>(co_await net::this_coro::executor);
  uint64_t id = 0;
  try {
    id = ctx.engine.submit(std::move(gen),
                           [events](const TokenEvent& event) { events->push(event); });
  } catch (const Error& e) {
    events->detach();
    throw fromEngineError(e);
  }
  Submission sub(ctx, events, id, prompt_tokens);
  conn.watchReadable(events);
  const ResponseFacts facts = newResponseFacts(req, model.id);
  GenerationOutput out({}, false, prompt_tokens);
  std::vector<ChatMessage> conversation = std::move(previous);
  conversation.insert(conversation.end(), req.input.begin(), req.input.end());
  Turn turn{ctx, conn, *events, sub, out, facts, std::move(conversation), request.keep_alive()};
  if (req.stream) co_return co_await streamedResponse(turn);
  co_return co_await wholeResponse(turn);
}

net::awaitable<Response> storedResponseAnswer(ServerContext& ctx, http::verb method,
                                              std::string_view id, bool keep_alive) {
  if (method == http::verb::delete_) {
    bool existed = false;
    if (plausibleId(id)) {
      std::optional<ApiError> failed;
      try {
        existed = co_await ctx.responses.remove(std::string(id));
      } catch (const Error& e) {
        failed = storeUnavailable(ctx, e);
      }
      if (failed) throw *failed;
    }
    if (!existed) throw responseNotFound(id);
    co_return jsonResponse(
        200, {{"id", std::string(id)}, {"object", "response"}, {"deleted", true}}, keep_alive);
  }
  std::optional<StoredResponse> stored = co_await lookup(ctx, id);
  if (!stored) throw responseNotFound(id);
  co_return jsonResponse(200, stored->response, keep_alive);
}

net::awaitable<Response> inputItemsAnswer(ServerContext& ctx, std::string_view id,
                                          std::string_view query, bool keep_alive) {
  const InputItemsPage page = parseInputItemsPage(query);  // 400 before asking the store
  std::optional<StoredResponse> stored = co_await lookup(ctx, id);
  if (!stored) throw responseNotFound(id);
  co_return jsonResponse(200, inputItemsList(*stored, page), keep_alive);
}

}  // namespace tpnode::node::api
