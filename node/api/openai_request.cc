#include "node/api/openai_request.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "node/api/api_error.h"
#include "node/api/json_fields.h"

namespace tpnode::node::api {
namespace {

using nlohmann::json;

constexpr int kMaxLogprobs = 20;
constexpr size_t kMaxStops = 16;
constexpr size_t kMaxTaps = 64;
constexpr uint64_t kMaxTapFloats = uint64_t{1} << 22;        // as JSON numbers (~10 bytes each)
constexpr uint64_t kMaxTapFloatsBase64 = uint64_t{1} << 25;  // as base64 f32 (128 MiB)

std::vector<std::string> stopList(const json& body) {
  const json* v = field(body, "stop");
  if (!v) return {};
  if (v->is_string()) return {v->get<std::string>()};
  if (!v->is_array() || v->size() > kMaxStops) {
    wrongValue("stop", *v, "a string or an array of at most 16 strings");
  }
  std::vector<std::string> out;
  for (const auto& s : *v) {
    if (!s.is_string()) wrongValue("stop", *v, "a string or an array of at most 16 strings");
    out.push_back(s.get<std::string>());
  }
  return out;
}

void parsePrompt(const json& body, OpenAiRequest& r) {
  const json* v = field(body, "prompt");
  if (!v) badRequest("prompt", "'prompt' is required: a string or an array of token ids");
  const json* p = v;
  // A batch of one ([["text"]] style) is accepted; real batches are not.
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) {
    p = &(*p)[0];
  }
  if (p->is_string()) {
    r.prompt_text = p->get<std::string>();
    return;
  }
  if (p->is_array() && !p->empty()) {
    r.prompt_is_ids = true;
    for (const auto& id : *p) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
          id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
        wrongValue("prompt", *v,
                   "a string or a non-empty array of token ids (batched prompts are not "
                   "supported)");
      }
      r.prompt_ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
    return;
  }
  wrongValue("prompt", *v,
             "a string or a non-empty array of token ids (batched prompts are not supported)");
}

std::string messageContent(const json& content, size_t index) {
  std::string name = fmt::format("messages[{}].content", index);
  if (content.is_null()) return {};
  if (content.is_string()) return content.get<std::string>();
  if (content.is_array()) {
    std::string text;
    for (const auto& part : content) {
      if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") ||
          !part["text"].is_string()) {
        wrongValue(name, content,
                   "a string or an array of {\"type\": \"text\", \"text\": ...} parts (only "
                   "text is supported)");
      }
      text += part["text"].get<std::string>();
    }
    return text;
  }
  wrongValue(name, content, "a string or an array of text parts");
}

void parseMessages(const json& body, OpenAiRequest& r) {
  const json* v = field(body, "messages");
  if (!v) badRequest("messages", "'messages' is required: a non-empty array of messages");
  if (!v->is_array() || v->empty()) wrongValue("messages", *v, "a non-empty array of messages");
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    std::string name = fmt::format("messages[{}]", i);
    if (!m.is_object()) wrongValue(name, m, "an object with 'role' and 'content'");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string() || role->get<std::string>().empty()) {
      wrongValue(name + ".role", role == m.end() ? json() : *role,
                 "a string (system, user, assistant)");
    }
    auto content = m.find("content");
    ChatMessage msg;
    msg.role = role->get<std::string>();
    if (content != m.end()) msg.content = messageContent(*content, i);
    r.messages.push_back(std::move(msg));
  }
}

void refuseUnsupported(const json& body) {
  int64_t n = integerField(body, "n", 1, 128, 1);
  if (n != 1)
    badRequest("n", fmt::format("'n' must be 1 (only one choice per request), got {}", n));
  if (boolField(body, "echo", false)) badRequest("echo", "'echo': true is not supported");
  if (integerField(body, "best_of", 1, 128, 1) != 1) {
    badRequest("best_of", "'best_of' other than 1 is not supported");
  }
  for (const char* name : {"tools", "functions"}) {
    const json* v = field(body, name);
    if (v && !(v->is_array() && v->empty())) {
      badRequest(name, fmt::format("'{}' (tool calling) is not supported", name));
    }
  }
  // Structured output (json_object, json_schema) is not constrained yet: refuse it rather
  // than answer free text the client would take for JSON.
  if (const json* v = field(body, "response_format")) {
    const json* type = v->is_object() ? field(*v, "type") : nullptr;
    if (type == nullptr || !type->is_string()) {
      wrongValue("response_format", *v, "an object {\"type\": \"text\"}");
    }
    if (*type != "text") {
      badRequest("response_format",
                 fmt::format("'response_format' type '{}' is not supported (only \"text\")",
                             type->get<std::string>()));
    }
  }
}

void parseLogprobs(const json& body, OpenAiRequest& r) {
  const json* v = field(body, "logprobs");
  if (r.endpoint == Endpoint::kCompletions) {
    if (!v) return;
    // Completions: an integer, the number of alternatives (0 = the chosen token only).
    r.top_logprobs = static_cast<int>(integerField(body, "logprobs", 0, kMaxLogprobs, 0));
    r.logprobs = true;
    return;
  }
  r.logprobs = boolField(body, "logprobs", false);
  r.top_logprobs = static_cast<int>(integerField(body, "top_logprobs", 0, kMaxLogprobs, 0));
  if (r.top_logprobs > 0 && !r.logprobs) {
    badRequest("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  }
}

// "taps": [{"layer": L, "point": "residual|attn_out|mlp_out|logits"}] (tpnode extension).
// The layer is checked against the model in prepareGeneration.
void parseTaps(const json& body, OpenAiRequest& r) {
  if (const json* enc = field(body, "tap_encoding")) {
    if (!enc->is_string() || (*enc != "json" && *enc != "base64")) {
      wrongValue("tap_encoding", *enc, "\"json\" or \"base64\"");
    }
    r.taps_base64 = *enc == "base64";
  }
  const json* v = field(body, "taps");
  if (!v) return;
  if (!v->is_array() || v->size() > kMaxTaps) {
    wrongValue("taps", *v, "an array of at most 64 objects {\"layer\": int, \"point\": string}");
  }
  for (size_t i = 0; i < v->size(); ++i) {
    const json& t = (*v)[i];
    const std::string name = fmt::format("taps[{}]", i);
    if (!t.is_object()) wrongValue(name, t, "an object {\"layer\": int, \"point\": string}");
    const json* point = field(t, "point");
    std::optional<model::TapPoint> p;
    if (point && point->is_string()) p = model::parseTapPoint(point->get<std::string>());
    if (!p) {
      wrongValue(name + ".point", point ? *point : json(nullptr),
                 "one of \"residual\", \"attn_out\", \"mlp_out\", \"logits\"");
    }
    model::TapSpec spec;
    spec.point = *p;
    // "logits" is the head's output: its layer is optional and ignored.
    const bool need_layer = *p != model::TapPoint::kLogits;
    const json* layer = field(t, "layer");
    if (layer) {
      if (!layer->is_number_integer() || layer->get<int64_t>() < 0 ||
          layer->get<int64_t>() > (1 << 20)) {
        wrongValue(name + ".layer", *layer, "a non-negative integer (a layer index)");
      }
      spec.layer = static_cast<int>(layer->get<int64_t>());
    } else if (need_layer) {
      wrongValue(name + ".layer", json(nullptr), "a non-negative integer (a layer index)");
    }
    if (!need_layer) spec.layer = -1;
    r.taps.push_back(spec);
  }
  if (!r.taps.empty() && r.stream) {
    badRequest("taps",
               "'taps' is answered in the whole (non-streamed) response; set 'stream' "
               "to false");
  }
}

}  // namespace

int jsonNestingDepth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return limit + 1;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

OpenAiRequest parseOpenAiRequest(Endpoint endpoint, const std::string& body_text,
                                 const RequestDefaults& defaults) {
  json body = parseJsonBody(body_text);
  OpenAiRequest r;
  r.endpoint = endpoint;
  if (const json* model = field(body, "model")) {
    if (!model->is_string()) wrongValue("model", *model, "a string");
    r.model = model->get<std::string>();
  }
  refuseUnsupported(body);
  if (endpoint == Endpoint::kCompletions) {
    parsePrompt(body, r);
  } else {
    parseMessages(body, r);
  }
  constexpr int64_t kMaxTokens = 1 << 24;
  int64_t max_tokens = integerField(body, "max_tokens", 1, kMaxTokens, -1);
  if (endpoint == Endpoint::kChat) {
    max_tokens = integerField(body, "max_completion_tokens", 1, kMaxTokens, max_tokens);
  }
  r.max_tokens = static_cast<int>(max_tokens);
  r.sampling = parseSampling(body, defaults.sampling);
  r.stop = stopList(body);
  r.stream = boolField(body, "stream", false);
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) wrongValue("stream_options", *so, "an object");
    r.include_usage = boolField(*so, "include_usage", false);
  }
  parseLogprobs(body, r);
  r.ignore_eos = boolField(body, "ignore_eos", false);
  parseTaps(body, r);
  return r;
}

uint64_t tapValueCount(const std::vector<model::TapSpec>& taps, int64_t n_prompt,
                       const ModelInfo& model) {
  uint64_t values = 0;
  for (const model::TapSpec& t : taps) {
    values +=
        static_cast<uint64_t>(std::max<int64_t>(0, n_prompt)) *
        static_cast<uint64_t>(t.point == model::TapPoint::kLogits ? model.n_vocab : model.n_embd);
  }
  return values;
}

GenerationRequest prepareGeneration(const OpenAiRequest& r, const Engine& engine,
                                    const ModelInfo& model, const RequestDefaults& defaults) {
  if (!r.model.empty() && r.model != model.id) {
    throw ApiError(404,
                   fmt::format("The model {} does not exist; this server serves `{}`.",
                               describeValue(json(r.model)), model.id),
                   "invalid_request_error", "model", "model_not_found");
  }
  GenerationRequest g;
  const char* prompt_field = r.endpoint == Endpoint::kChat ? "messages" : "prompt";
  try {
    if (r.endpoint == Endpoint::kChat) {
      g.prompt_ids = engine.tokenize(engine.renderChat(r.messages), /*add_special=*/true);
    } else if (r.prompt_is_ids) {
      g.prompt_ids = r.prompt_ids;
    } else {
      g.prompt_ids = engine.tokenize(r.prompt_text, /*add_special=*/true);
    }
  } catch (const Error& e) {
    ApiError api = fromEngineError(e);
    if (api.status() != 400) throw api;
    // E.g. a chat template that cannot be rendered: code "unsupported", naming the field.
    throw ApiError(400, e.what(), "invalid_request_error", prompt_field,
                   e.code() == ErrorCode::kUnsupported ? "unsupported" : "");
  }
  for (int32_t id : g.prompt_ids) {
    if (id < 0 || id >= model.n_vocab) {
      badRequest(prompt_field, fmt::format("token id {} is outside the vocabulary (0..{})", id,
                                           model.n_vocab - 1));
    }
  }
  if (g.prompt_ids.empty()) badRequest(prompt_field, "the prompt is empty");
  const int64_t n_prompt = static_cast<int64_t>(g.prompt_ids.size());
  const int64_t room = model.context_length - n_prompt;
  int64_t max_tokens = r.max_tokens;
  if (max_tokens < 0) {
    max_tokens = defaults.max_tokens             ? *defaults.max_tokens
                 : r.endpoint == Endpoint::kChat ? RequestDefaults::kChatMaxTokens
                                                 : RequestDefaults::kCompletionsMaxTokens;
    max_tokens = std::min(max_tokens, room);
  }
  if (room <= 0 || max_tokens > room) {
    throw ApiError(
        400,
        fmt::format("This model's maximum context length is {} tokens. However, you "
                    "requested {} tokens ({} in the {}, {} in the completion). Please "
                    "reduce the length of the {} or the completion.",
                    model.context_length, n_prompt + std::max<int64_t>(max_tokens, 0), n_prompt,
                    prompt_field, std::max<int64_t>(max_tokens, 0), prompt_field),
        "invalid_request_error", prompt_field, "context_length_exceeded");
  }
  g.max_tokens = static_cast<int>(max_tokens);
  g.sampling = r.sampling;
  g.top_logprobs = r.top_logprobs;
  g.logprobs = r.logprobs || r.top_logprobs > 0;
  g.ignore_eos = r.ignore_eos;
  for (size_t i = 0; i < r.taps.size(); ++i) {
    const model::TapSpec& t = r.taps[i];
    if (t.point != model::TapPoint::kLogits && t.layer >= model.n_layer) {
      badRequest(fmt::format("taps[{}].layer", i),
                 fmt::format("'taps[{}].layer' must be in [0, {}], got {}", i, model.n_layer - 1,
                             t.layer));
    }
  }
  const uint64_t tap_floats = tapValueCount(r.taps, n_prompt, model);
  const uint64_t cap = r.taps_base64 ? kMaxTapFloatsBase64 : kMaxTapFloats;
  if (tap_floats > cap) {
    badRequest("taps", fmt::format("the taps ask for {} values ({} prompt tokens); at most {} "
                                   "fit in one response with tap_encoding \"{}\"{}",
                                   tap_floats, n_prompt, cap, r.taps_base64 ? "base64" : "json",
                                   r.taps_base64 ? "" : " (base64 allows 8x more)"));
  }
  g.taps = r.taps;
  return g;
}

}  // namespace tpnode::node::api
