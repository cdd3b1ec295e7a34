#include "node/api/generation_handler.h"

// GCC 12 reports -Wmismatched-new-delete inside Asio's awaitable frame allocator when a
// coroutine frame grows past an inlining threshold: a false positive (the frame is allocated
// and freed by the same awaitable_frame_base operators).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

#include <chrono>

#include "common/log.h"
#include "node/api/generation_output.h"
#include "node/api/openai_response.h"
#include "node/api/submission.h"

namespace tpnode::node::api {
namespace {

using nlohmann::json;

std::string sse(const json& chunk) {
  return "data: " + dumpJson(chunk) + "\n\n";
}

net::awaitable<GenerationResult> streamAnswer(ServerContext& ctx, Connection& conn,
                                              GenerationEvents& events, Submission& sub,
                                              GenerationOutput& out, const ResponseMeta& meta,
                                              const OpenAiRequest& req, bool keep_alive) {
  if (!co_await conn.writeStreamHeader(keep_alive)) co_return GenerationResult{false, 200};
  net::steady_timer timer(co_await net::this_coro::executor);
  int64_t offset = 0;
  std::string pending;
  if (meta.endpoint == Endpoint::kChat) {
    pending = sse(streamChunk(meta, "", nullptr, "", true, req.include_usage));
  }
  while (!out.finished()) {
    if (!pending.empty()) {
      if (!co_await conn.writeChunk(pending)) co_return GenerationResult{false, 200};
      pending.clear();
    }
    std::vector<TokenEvent> batch;
    if (!co_await nextEvents(ctx, conn, events, timer, sub, batch)) {
      co_return GenerationResult{false, 200};
    }
    for (const TokenEvent& ev : batch) {
      sub.account(ev);
      Delta d = out.onEvent(ev);
      if (out.stopMatched()) sub.cancel();
      if (!d.empty()) {
        pending += sse(streamChunk(meta, d.text, logprobsJson(meta, d.logprobs, offset), "", false,
                                   req.include_usage));
      }
      if (out.finished()) break;
    }
  }
  conn.cancelWatch();
  if (out.finishReason() == "error") {
    pending +=
        sse(ApiError(503, out.error(), "service_unavailable", "", "generation_failed").body());
  } else {
    pending += sse(streamChunk(meta, "", nullptr, out.finishReason(), false, req.include_usage));
    if (req.include_usage) {
      pending +=
          sse(usageChunk(meta, out.promptTokens(), out.completionTokens(), out.cachedTokens()));
    }
    pending += "data: [DONE]\n\n";
  }
  bool ok = co_await conn.writeChunk(pending) && co_await conn.writeLastChunk();
  co_return GenerationResult{ok, 200};
}

net::awaitable<GenerationResult> wholeAnswer(ServerContext& ctx, Connection& conn,
                                             GenerationEvents& events, Submission& sub,
                                             GenerationOutput& out, const ResponseMeta& meta,
                                             bool keep_alive) {
  net::steady_timer timer(co_await net::this_coro::executor);
  std::string text;
  std::vector<LogprobEntry> logprobs;
  while (!out.finished()) {
    std::vector<TokenEvent> batch;
    if (!co_await nextEvents(ctx, conn, events, timer, sub, batch)) {
      co_return GenerationResult{false, 499};
    }
    for (const TokenEvent& ev : batch) {
      sub.account(ev);
      Delta d = out.onEvent(ev);
      if (out.stopMatched()) sub.cancel();
      text += d.text;
      for (auto& e : d.logprobs) logprobs.push_back(std::move(e));
      if (out.finished()) break;
    }
  }
  conn.cancelWatch();
  if (out.finishReason() == "error") {
    ApiError err(503, out.error(), "service_unavailable", "", "generation_failed");
    bool ok = co_await conn.write(errorResponse(err, keep_alive));
    co_return GenerationResult{ok, 503};
  }
  int64_t offset = 0;
  json body = finalResponse(meta, text, logprobsJson(meta, logprobs, offset), out.finishReason(),
                            out.promptTokens(), out.completionTokens(), out.cachedTokens());
  if (meta.taps) body["taps"] = tapsJson(out.taps(), meta.taps_base64);
  bool ok = co_await conn.write(jsonResponse(200, body, keep_alive));
  co_return GenerationResult{ok, 200};
}

}  // namespace

net::awaitable<GenerationResult> handleGeneration(ServerContext& ctx, Connection& conn,
                                                  const Request& request, Endpoint endpoint) {
  OpenAiRequest req = parseOpenAiRequest(endpoint, request.body(), ctx.options.defaults);
  if (!ctx.engine.ready()) {
    throw ApiError(503, "the cluster is not ready: " + ctx.engine.notReadyReason(),
                   "service_unavailable", "", "not_ready");
  }
  ModelInfo model = ctx.engine.modelInfo();
  GenerationRequest gen = prepareGeneration(req, ctx.engine, model, ctx.options.defaults);
  const int prompt_tokens = static_cast<int>(gen.prompt_ids.size());
  // Held until the answer is written: the taps' values live until then.
  std::unique_ptr<TapBudget::Lease> tap_lease;
  if (!gen.taps.empty()) {
    tap_lease = ctx.taps.acquire(4 * tapValueCount(gen.taps, prompt_tokens, model));
  }

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

  ResponseMeta meta{
      endpoint,          newResponseId(endpoint), 0, model.id, req.logprobs, req.top_logprobs,
      !req.taps.empty(), req.taps_base64};
  meta.created = std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  GenerationOutput out(req.stop, req.logprobs, prompt_tokens);
  if (req.stream) {
    co_return co_await streamAnswer(ctx, conn, *events, sub, out, meta, req, request.keep_alive());
  }
  co_return co_await wholeAnswer(ctx, conn, *events, sub, out, meta, request.keep_alive());
}

}  // namespace tpnode::node::api
