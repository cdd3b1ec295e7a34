#include "node/api/llama_handler.h"

#include <fmt/format.h>

#include "common/version.h"
#include "node/api/api_error.h"

namespace tpnode::node::api {
namespace {

using nlohmann::json;

constexpr size_t kMaxDetokenize = 1 << 20;

json parseBody(const std::string& text) {
  json body;
  try {
    body = json::parse(text);
  } catch (const json::parse_error& e) {
    throw ApiError(400, fmt::format("the request body is not valid JSON: {}", e.what()),
                   "invalid_request_error", "", "invalid_json");
  }
  if (!body.is_object()) {
    throw ApiError(400, "the request body must be a JSON object", "invalid_request_error");
  }
  return body;
}

bool optionalBool(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return false;
  if (!it->is_boolean()) {
    badRequest(name, fmt::format("'{}' must be true or false, got {}", name, describeValue(*it)));
  }
  return it->get<bool>();
}

bool validUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80           ? 1
                     : (c >> 5) == 0x6  ? 2
                     : (c >> 4) == 0xe  ? 3
                     : (c >> 3) == 0x1e ? 4
                                        : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

}  // namespace

json tokenizeAnswer(const Engine& engine, const std::string& text) {
  const json body = parseBody(text);
  auto content = body.find("content");
  if (content == body.end() || !content->is_string()) {
    badRequest("content", fmt::format("'content' must be a string, got {}",
                                      content == body.end() ? "nothing" : describeValue(*content)));
  }
  const bool add_special = optionalBool(body, "add_special");
  const bool with_pieces = optionalBool(body, "with_pieces");
  std::vector<int32_t> ids = engine.tokenize(content->get<std::string>(), add_special);
  json tokens = json::array();
  for (int32_t id : ids) {
    if (!with_pieces) {
      tokens.push_back(id);
      continue;
    }
    std::string piece = engine.tokenPiece(id);
    json p = json::array();
    if (validUtf8(piece)) {
      p = piece;
    } else {
      for (char c : piece) p.push_back(static_cast<unsigned char>(c));
    }
    tokens.push_back({{"id", id}, {"piece", p}});
  }
  return {{"tokens", tokens}};
}

json detokenizeAnswer(const Engine& engine, const std::string& text) {
  const json body = parseBody(text);
  auto tokens = body.find("tokens");
  const char* expected = "an array of token ids";
  if (tokens == body.end() || !tokens->is_array() || tokens->size() > kMaxDetokenize) {
    badRequest("tokens", fmt::format("'tokens' must be {}, got {}", expected,
                                     tokens == body.end() ? "nothing" : describeValue(*tokens)));
  }
  const int n_vocab = engine.modelInfo().n_vocab;
  std::vector<int32_t> ids;
  for (const json& t : *tokens) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= n_vocab) {
      badRequest("tokens", fmt::format("'tokens' holds {}: token ids are integers in [0, {}]",
                                       describeValue(t), n_vocab - 1));
    }
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return {{"content", engine.detokenize(ids)}};
}

json propsAnswer(const Engine& engine, const RequestDefaults& d) {
  const ModelInfo m = engine.modelInfo();
  const SamplingOptions& s = d.sampling;
  json params = {{"n_predict", d.max_tokens ? *d.max_tokens : -1},
                 {"temperature", s.temperature},
                 {"top_k", s.top_k},
                 {"top_p", s.top_p},
                 {"min_p", s.min_p},
                 {"repeat_penalty", s.repeat_penalty},
                 {"presence_penalty", s.presence_penalty},
                 {"frequency_penalty", s.frequency_penalty},
                 {"seed", s.seed ? json(*s.seed) : json(-1)}};
  return {{"default_generation_settings", {{"n_ctx", m.context_length}, {"params", params}}},
          {"total_slots", m.slots},
          {"kv_cache",
           {{"block_size", m.kv_block_size},
            {"blocks_total", m.kv_blocks_total},
            {"blocks_free", m.kv_blocks_free},
            {"prefix_cache", m.prefix_cache},
            {"redis", m.kv_redis ? json{{"ttl_s", m.kv_redis_ttl_s}} : json(nullptr)}}},
          {"model_alias", m.id},
          {"model_path", m.path},
          {"chat_template", m.chat_template},
          {"modalities", {{"vision", false}, {"audio", false}}},
          {"build_info", std::string(TPNODE_VERSION) + "-" + TPNODE_GIT_COMMIT}};
}

}  // namespace tpnode::node::api
