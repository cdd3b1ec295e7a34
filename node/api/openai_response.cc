#include "node/api/openai_response.h"

#include <bit>
#include <random>

#include <fmt/format.h>
#include <openssl/evp.h>

namespace tpnode::node::api {
namespace {

using nlohmann::json;

json bytesOf(const std::string& s) {
  json out = json::array();
  for (char c : s) out.push_back(static_cast<int>(static_cast<unsigned char>(c)));
  return out;
}

json usage(int prompt_tokens, int completion_tokens, int cached_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

json completionsLogprobs(const std::vector<LogprobEntry>& entries, int64_t& offset, bool top) {
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (const auto& e : entries) {
    tokens.push_back(e.token);
    lps.push_back(e.logprob);
    offsets.push_back(offset);
    offset += static_cast<int64_t>(e.token.size());
    json alts = json::object();
    for (const auto& t : e.top) alts[t.text] = t.logprob;
    tops.push_back(alts);
  }
  return {{"tokens", tokens},
          {"token_logprobs", lps},
          {"top_logprobs", top ? tops : json(nullptr)},
          {"text_offset", offsets}};
}

json chatLogprobs(const std::vector<LogprobEntry>& entries) {
  json content = json::array();
  for (const auto& e : entries) {
    json alts = json::array();
    for (const auto& t : e.top) {
      alts.push_back({{"token", t.text}, {"logprob", t.logprob}, {"bytes", bytesOf(t.text)}});
    }
    content.push_back({{"token", e.token},
                       {"logprob", e.logprob},
                       {"bytes", bytesOf(e.token)},
                       {"top_logprobs", alts}});
  }
  return {{"content", content}, {"refusal", nullptr}};
}

json finishValue(const std::string& reason) {
  return reason.empty() ? json(nullptr) : json(reason);
}

}  // namespace

std::string newResponseId(Endpoint endpoint) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}-{:016x}{:08x}", endpoint == Endpoint::kChat ? "chatcmpl" : "cmpl", rng(),
                     static_cast<uint32_t>(rng()));
}

json logprobsJson(const ResponseMeta& meta, const std::vector<LogprobEntry>& entries,
                  int64_t& text_offset) {
  if (!meta.logprobs) return nullptr;
  if (meta.endpoint == Endpoint::kChat) return chatLogprobs(entries);
  return completionsLogprobs(entries, text_offset, meta.top_logprobs > 0);
}

json streamChunk(const ResponseMeta& meta, const std::string& text, const json& logprobs,
                 const std::string& finish_reason, bool role_chunk, bool usage_null) {
  json choice = {
      {"index", 0}, {"logprobs", logprobs}, {"finish_reason", finishValue(finish_reason)}};
  json chunk = {{"id", meta.id}, {"created", meta.created}, {"model", meta.model}};
  if (meta.endpoint == Endpoint::kChat) {
    json delta = json::object();
    if (role_chunk) delta["role"] = "assistant";
    if (role_chunk || !text.empty()) delta["content"] = text;
    choice["delta"] = delta;
    chunk["object"] = "chat.completion.chunk";
  } else {
    choice["text"] = text;
    chunk["object"] = "text_completion";
  }
  chunk["choices"] = json::array({choice});
  if (usage_null) chunk["usage"] = nullptr;
  return chunk;
}

json usageChunk(const ResponseMeta& meta, int prompt_tokens, int completion_tokens,
                int cached_tokens) {
  return {
      {"id", meta.id},
      {"object", meta.endpoint == Endpoint::kChat ? "chat.completion.chunk" : "text_completion"},
      {"created", meta.created},
      {"model", meta.model},
      {"choices", json::array()},
      {"usage", usage(prompt_tokens, completion_tokens, cached_tokens)}};
}

json finalResponse(const ResponseMeta& meta, const std::string& text, const json& logprobs,
                   const std::string& finish_reason, int prompt_tokens, int completion_tokens,
                   int cached_tokens) {
  json choice = {
      {"index", 0}, {"logprobs", logprobs}, {"finish_reason", finishValue(finish_reason)}};
  json out = {{"id", meta.id}, {"created", meta.created}, {"model", meta.model}};
  if (meta.endpoint == Endpoint::kChat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
    out["object"] = "chat.completion";
  } else {
    choice["text"] = text;
    out["object"] = "text_completion";
  }
  out["choices"] = json::array({choice});
  out["usage"] = usage(prompt_tokens, completion_tokens, cached_tokens);
  return out;
}

nlohmann::json tapsJson(const std::vector<TapResult>& taps, bool base64) {
  nlohmann::json out = nlohmann::json::array();
  for (const TapResult& t : taps) {
    nlohmann::json layer = nullptr;
    if (t.spec.point != model::TapPoint::kLogits) layer = t.spec.layer;
    nlohmann::json entry = {{"layer", layer},
                            {"point", std::string(model::tapPointName(t.spec.point))},
                            {"shape", {t.rows, t.cols}}};
    if (base64) {
      static_assert(std::endian::native == std::endian::little, "f32 bytes are sent as stored");
      const size_t n = t.data.size() * sizeof(float);
      std::string text(4 * ((n + 2) / 3), '\0');
      const int written = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(text.data()),
                                          reinterpret_cast<const unsigned char*>(t.data.data()),
                                          static_cast<int>(n));
      text.resize(static_cast<size_t>(written));
      entry["encoding"] = "base64";
      entry["dtype"] = "<f4";
      entry["data"] = std::move(text);
    } else {
      nlohmann::json rows = nlohmann::json::array();
      for (int64_t r = 0; r < t.rows; ++r) {
        const float* row = t.data.data() + r * t.cols;
        rows.push_back(std::vector<float>(row, row + t.cols));
      }
      entry["data"] = std::move(rows);
    }
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace tpnode::node::api
